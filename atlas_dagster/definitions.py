"""The Dagster code location: assets and resources wired from the tenants file."""

from __future__ import annotations

from dagster import Definitions

from atlas_dagster.assets.gold import gold_assets, verify_gold_job
from atlas_dagster.assets.raw import raw_assets
from atlas_dagster.orchestration.automation import gold_automation_sensor
from atlas_dagster.partitions import partitions_for
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.settings import tenants_file
from atlas_dagster.tenants import load_tenants


def build_definitions() -> Definitions:
    tenants = load_tenants(tenants_file())
    partitions_def = partitions_for(tenants)
    return Definitions(
        assets=[*raw_assets(tenants, partitions_def), *gold_assets(tenants, partitions_def)],
        jobs=[verify_gold_job()],
        sensors=[gold_automation_sensor()],
        resources={"clickhouse": ClickHouseResource()},
    )


defs = build_definitions()
