"""The ClickHouse resource the CLI's commands use, configured from this process's settings
(ATLAS_CLICKHOUSE_DSN, ATLAS_CLICKHOUSE_CLUSTER, ATLAS_EMBEDDED_INFLIGHT_MB) as definitions.py
configures the code location's."""

from __future__ import annotations

from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.settings import current_settings


def clickhouse_resource() -> ClickHouseResource:
    """Embedded (chdb://) or a server, as the settings say."""
    settings = current_settings()
    return ClickHouseResource(
        dsn=settings.clickhouse_dsn,
        cluster=settings.clickhouse_cluster or "",
        embedded_inflight_mb=settings.embedded_inflight_mb,
    )
