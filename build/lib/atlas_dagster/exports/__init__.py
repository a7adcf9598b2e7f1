"""The export side: where a tenant-day's Parquet files live and what their footers say."""
