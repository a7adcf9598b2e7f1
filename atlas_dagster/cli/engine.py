"""The one ClickHouse resource the CLI's commands use: DSN and cluster from the environment."""

from __future__ import annotations

from atlas_dagster.resources.clickhouse import ClickHouseResource


def engine() -> ClickHouseResource:
    """Embedded (chdb://) or a server, as ATLAS_CLICKHOUSE_DSN says; the DSN and
    ATLAS_CLICKHOUSE_CLUSTER are read when the resource is used, not when it is made."""
    return ClickHouseResource()
