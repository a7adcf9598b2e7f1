"""The Dagster code location: each area's definitions, merged, with ClickHouse wired once here."""

from __future__ import annotations

import os
from collections.abc import Sequence

from dagster import Definitions, EnvVar, MultiPartitionsDefinition, in_process_executor

from atlas_dagster.assets.gold import gold_assets, verify_gold_job
from atlas_dagster.assets.raw import raw_assets
from atlas_dagster.assets.report import report_definitions_parts
from atlas_dagster.orchestration.automation import gold_automation_sensor
from atlas_dagster.orchestration.queue_sensor import release_held_backfill_runs
from atlas_dagster.orchestration.sensors import backfill_log_sensors
from atlas_dagster.partitions import partitions_for
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import is_embedded
from atlas_dagster.settings import DSN_VARIABLE, check_load_limits, clickhouse_dsn, tenants_file
from atlas_dagster.tenants import Tenant, load_tenants


def clickhouse_wiring() -> tuple[ClickHouseResource, bool]:
    """The resource and whether its engine is embedded, both from the one DSN setting.

    ATLAS_CLICKHOUSE_DSN is wired as an EnvVar: each run resolves it, and the UI shows the
    variable's name, never the password a server DSN carries. Unset, the embedded default under
    ATLAS_HOME (a path, no secret) is configured as it is.
    """
    dsn = clickhouse_dsn()
    configured = EnvVar(DSN_VARIABLE) if os.environ.get(DSN_VARIABLE) else dsn
    return ClickHouseResource(dsn=configured), is_embedded(dsn)


def raw_definitions(
    tenants: Sequence[Tenant], partitions: MultiPartitionsDefinition
) -> Definitions:
    return Definitions(assets=raw_assets(list(tenants), partitions))


def gold_definitions(
    tenants: Sequence[Tenant], partitions: MultiPartitionsDefinition, embedded: bool
) -> Definitions:
    return Definitions(
        assets=gold_assets(tenants, partitions, embedded=embedded),
        jobs=[verify_gold_job()],
        sensors=[gold_automation_sensor()],
    )


def orchestration_definitions() -> Definitions:
    return Definitions(
        sensors=[release_held_backfill_runs],
        # A run is one step per asset; a subprocess per step would only add launch time.
        executor=in_process_executor,
    )


def report_definitions(tenants: Sequence[Tenant]) -> Definitions:
    """Each client's progress report: the asset, its job, the daily schedule, the after-loads
    sensor."""
    asset, job, daily, after_loads = report_definitions_parts(tenants)
    return Definitions(assets=[asset], jobs=[job], schedules=[daily], sensors=[after_loads])


def monitoring_definitions() -> Definitions:
    return Definitions(sensors=backfill_log_sensors())


def build_definitions() -> Definitions:
    check_load_limits()  # refuse bad limits when the code location loads, not mid-backfill
    tenants = load_tenants(tenants_file())
    partitions = partitions_for(tenants)
    clickhouse, embedded = clickhouse_wiring()
    return Definitions.merge(
        raw_definitions(tenants, partitions),
        gold_definitions(tenants, partitions, embedded),
        orchestration_definitions(),
        monitoring_definitions(),
        report_definitions(tenants),
        Definitions(resources={"clickhouse": clickhouse}),
    )


defs = build_definitions()
