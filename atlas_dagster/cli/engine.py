"""What the CLI's commands read their engine and INSERT limit from: the ClickHouse resource
configured from this process's settings (ATLAS_CLICKHOUSE_DSN, ATLAS_CLICKHOUSE_CLUSTER,
ATLAS_EMBEDDED_INFLIGHT_MB) as definitions.py configures the code location's, and the pool's
live limit for time-left figures."""

from __future__ import annotations

import os

from dagster import DagsterInstance

from atlas_dagster.orchestration.insert_limit import live_limit
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


def live_insert_limit(instance: DagsterInstance | None = None) -> int:
    """The pool's live limit (0: stopped) on `instance`, else on DAGSTER_HOME's instance when it
    exists, else ATLAS_MAX_PARALLEL_INSERTS (which seeds the pool): the most loads the CLI's
    time-left figures count at once."""
    configured = current_settings().load.parallel_inserts
    if instance is not None:
        return live_limit(instance, configured)
    home = os.environ.get("DAGSTER_HOME", "")
    if not home or not os.path.isdir(home):
        return live_limit(None, configured)
    with DagsterInstance.get() as found:
        return live_limit(found, configured)
