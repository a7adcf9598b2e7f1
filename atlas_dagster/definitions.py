"""The Dagster code location: assets and resources wired from the tenants file."""

from __future__ import annotations

from dagster import Definitions

from atlas_dagster.assets.raw import raw_assets
from atlas_dagster.monitoring.sensors import backfill_log_sensors
from atlas_dagster.partitions import partitions_for
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.settings import tenants_file
from atlas_dagster.tenants import load_tenants


def build_definitions() -> Definitions:
    tenants = load_tenants(tenants_file())
    partitions_def = partitions_for(tenants)
    return Definitions(
        assets=raw_assets(tenants, partitions_def),
        resources={"clickhouse": ClickHouseResource()},
        sensors=backfill_log_sensors(),
    )


defs = build_definitions()
