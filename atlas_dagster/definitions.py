"""The Dagster code location: assets, checks, sensors and resources wired from the tenants file."""

from __future__ import annotations

from dagster import Definitions, in_process_executor

from atlas_dagster.assets.raw import raw_assets
from atlas_dagster.orchestration.queue_sensor import release_held_backfill_runs
from atlas_dagster.partitions import partitions_for
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.settings import parallel_inserts, ramp_up_days, tenants_file
from atlas_dagster.tenants import load_tenants


def build_definitions() -> Definitions:
    # Refuse bad load limits when the code location loads, not in the middle of a backfill.
    parallel_inserts(), ramp_up_days()
    tenants = load_tenants(tenants_file())
    partitions_def = partitions_for(tenants)
    return Definitions(
        assets=raw_assets(tenants, partitions_def),
        sensors=[release_held_backfill_runs],
        resources={"clickhouse": ClickHouseResource()},
        # A run is one step per asset; a subprocess per step would only add launch time.
        executor=in_process_executor,
    )


defs = build_definitions()
