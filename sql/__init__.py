"""The SQL text, installed as the package atlas_dagster.sql_files: read via atlas_dagster.sql."""
