"""The Dagster code location: assets, checks, sensors and resources wired from the tenants file."""

from __future__ import annotations

from dagster import Definitions, in_process_executor

from atlas_dagster.assets.gold import gold_assets, verify_gold_job
from atlas_dagster.assets.raw import raw_assets
from atlas_dagster.monitoring.sensors import backfill_log_sensors
from atlas_dagster.orchestration.automation import gold_automation_sensor
from atlas_dagster.orchestration.queue_sensor import release_held_backfill_runs
from atlas_dagster.partitions import partitions_for
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.settings import check_load_limits, tenants_file
from atlas_dagster.tenants import load_tenants


def build_definitions() -> Definitions:
    check_load_limits()  # refuse bad limits when the code location loads, not mid-backfill
    tenants = load_tenants(tenants_file())
    partitions_def = partitions_for(tenants)
    return Definitions(
        assets=[*raw_assets(tenants, partitions_def), *gold_assets(tenants, partitions_def)],
        jobs=[verify_gold_job()],
        sensors=[release_held_backfill_runs, *backfill_log_sensors(), gold_automation_sensor()],
        resources={"clickhouse": ClickHouseResource()},
        # A run is one step per asset; a subprocess per step would only add launch time.
        executor=in_process_executor,
    )


defs = build_definitions()
