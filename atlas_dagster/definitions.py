"""The Dagster code location: each area's definitions, merged, with its resources wired once here
from the settings read once when it loads."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from dagster import Definitions, EnvVar, MultiPartitionsDefinition, in_process_executor

from atlas_dagster.assets.gold import gold_assets, verify_gold_job
from atlas_dagster.assets.raw import raw_assets
from atlas_dagster.assets.report import report_definitions_parts
from atlas_dagster.orchestration.automation import gold_automation_sensor
from atlas_dagster.orchestration.queue_sensor import release_held_runs_sensor
from atlas_dagster.orchestration.redelivery import redelivery_sensor
from atlas_dagster.orchestration.sensors import backfill_log_sensors
from atlas_dagster.orchestration.verify_job import verify_raw_job
from atlas_dagster.partitions import partitions_for
from atlas_dagster.resources.atlas_settings import RESOURCE_KEY as SETTINGS_KEY
from atlas_dagster.resources.atlas_settings import AtlasSettings
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import is_embedded
from atlas_dagster.settings import (
    CLUSTER_VARIABLE,
    DSN_VARIABLE,
    EMBEDDED_INFLIGHT_MB,
    Settings,
    is_set,
)
from atlas_dagster.tenants import Tenant, load_tenants


def clickhouse_wiring(
    settings: Settings, environ: Mapping[str, str] = os.environ
) -> tuple[ClickHouseResource, bool]:
    """The resource and whether its engine is embedded, both from the one DSN setting.

    ATLAS_CLICKHOUSE_DSN is wired as an EnvVar: each run resolves it, and the UI shows the
    variable's name, never the password a server DSN carries. Unset, the embedded default under
    ATLAS_HOME (a path, no secret) is configured as it is. ATLAS_CLICKHOUSE_CLUSTER and
    ATLAS_EMBEDDED_INFLIGHT_MB likewise: an EnvVar when set, else the setting's value (no
    cluster: ''), so that a run reads neither from its environment.
    """
    dsn = settings.clickhouse_dsn
    inflight = settings.embedded_inflight_mb
    clickhouse = ClickHouseResource(
        dsn=EnvVar(DSN_VARIABLE) if environ.get(DSN_VARIABLE) else dsn,
        cluster=EnvVar(CLUSTER_VARIABLE) if settings.clickhouse_cluster else "",
        embedded_inflight_mb=(
            EnvVar.int(EMBEDDED_INFLIGHT_MB.variable)
            if is_set(environ, EMBEDDED_INFLIGHT_MB.variable)
            else inflight
        ),
    )
    return clickhouse, is_embedded(dsn)


def raw_definitions(
    tenants: Sequence[Tenant], partitions: MultiPartitionsDefinition
) -> Definitions:
    return Definitions(
        assets=raw_assets(list(tenants), partitions), jobs=[verify_raw_job(list(tenants))]
    )


def gold_definitions(
    tenants: Sequence[Tenant],
    partitions: MultiPartitionsDefinition,
    embedded: bool,
    settings: Settings,
) -> Definitions:
    return Definitions(
        assets=gold_assets(
            tenants, partitions, settings.liability_lookback_days, embedded=embedded
        ),
        jobs=[verify_gold_job()],
        sensors=[gold_automation_sensor(settings.automation_seconds)],
    )


def orchestration_definitions(partitions: MultiPartitionsDefinition) -> Definitions:
    return Definitions(
        sensors=[release_held_runs_sensor(partitions)],
        # A run is one step per asset; a subprocess per step would only add launch time.
        executor=in_process_executor,
    )


def report_definitions(tenants: Sequence[Tenant], settings: Settings) -> Definitions:
    """Each client's progress report: the asset, its job, the daily schedule, the after-loads
    sensor."""
    asset, job, daily, after_loads = report_definitions_parts(tenants, settings)
    return Definitions(assets=[asset], jobs=[job], schedules=[daily], sensors=[after_loads])


def monitoring_definitions(tenants: Sequence[Tenant], settings: Settings) -> Definitions:
    return Definitions(
        sensors=[
            *backfill_log_sensors(settings.stale_sweep_seconds),
            redelivery_sensor(tenants, settings.redelivery_seconds),
        ]
    )


def build_definitions(environ: Mapping[str, str] = os.environ) -> Definitions:
    # Every setting read and checked once, when the code location loads: a bad value is
    # refused here (naming the variable), not mid-backfill. Runs get theirs from the resources.
    settings = Settings.from_env(environ)
    tenants = load_tenants(settings.tenants_file)
    partitions = partitions_for(tenants)
    clickhouse, embedded = clickhouse_wiring(settings, environ)
    return Definitions.merge(
        raw_definitions(tenants, partitions),
        gold_definitions(tenants, partitions, embedded, settings),
        orchestration_definitions(partitions),
        monitoring_definitions(tenants, settings),
        report_definitions(tenants, settings),
        Definitions(
            resources={"clickhouse": clickhouse, SETTINGS_KEY: AtlasSettings.wired(environ)}
        ),
    )


defs = build_definitions()
