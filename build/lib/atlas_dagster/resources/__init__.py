"""Dagster resources: ClickHouse access and per-tenant S3 clients."""
