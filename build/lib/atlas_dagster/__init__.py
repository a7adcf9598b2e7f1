"""atlas-dagster: historical Parquet exports → ClickHouse, orchestrated by Dagster."""
