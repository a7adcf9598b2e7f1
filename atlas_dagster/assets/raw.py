"""Raw assets tbt_raw_events_<domain>: tenant-days loaded inside ClickHouse, newest day first."""

import warnings
from collections.abc import Iterator

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetMaterialization,
    AssetsDefinition,
    AssetSpec,
    BackfillPolicy,
    MultiPartitionsDefinition,
    PreviewWarning,
    multi_asset,
)

from atlas_dagster.checks.raw import RAW_CHECK_DESCRIPTIONS, RAW_CHECK_NAMES
from atlas_dagster.domains import DOMAINS, Domain
from atlas_dagster.orchestration.raw_run import RAW_STEP, RawRun
from atlas_dagster.resources.atlas_settings import AtlasSettings
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import Tenant

RAW_GROUP = "raw"


def raw_spec(domain: Domain, partitions_def: MultiPartitionsDefinition) -> AssetSpec:
    return AssetSpec(
        key=domain.raw_table,
        group_name=RAW_GROUP,
        partitions_def=partitions_def,
        kinds={"clickhouse", "parquet"},
        skippable=True,
        description=(
            f"Historical {domain.name} events ({', '.join(domain.event_types)}) loaded per "
            f"tenant-day from the Parquet export through atlas.{domain.inbound_table} (Null) "
            f"and atlas.{domain.bridge_view}. Read with FINAL."
        ),
    )


def raw_check_specs(
    domain: Domain, partitions_def: MultiPartitionsDefinition
) -> list[AssetCheckSpec]:
    with warnings.catch_warnings():
        # Partitioned checks are a preview in dagster 1.13, and the point: one result per day.
        warnings.simplefilter("ignore", PreviewWarning)
        return [
            AssetCheckSpec(
                name,
                asset=domain.raw_table,
                partitions_def=partitions_def,
                description=RAW_CHECK_DESCRIPTIONS[name],
            )
            for name in RAW_CHECK_NAMES
        ]


def raw_assets(
    tenants: list[Tenant], partitions_def: MultiPartitionsDefinition
) -> list[AssetsDefinition]:
    """One step loads any subset of the domains for one partition or a range of them."""

    @multi_asset(
        name=RAW_STEP,
        specs=[raw_spec(d, partitions_def) for d in DOMAINS.values()],
        check_specs=[c for d in DOMAINS.values() for c in raw_check_specs(d, partitions_def)],
        can_subset=True,
        # One run per tenant and range: its days still load, log and report one by one.
        backfill_policy=BackfillPolicy.single_run(),
    )
    def raw_events(
        context: AssetExecutionContext,
        clickhouse: ClickHouseResource,
        atlas_settings: AtlasSettings,
    ) -> Iterator[AssetMaterialization]:
        # The run's tunables come from its resource (definitions.py wires it from the code
        # location's settings; a launchpad run may override them), never from the environment.
        yield from RawRun(context, clickhouse, tenants, atlas_settings.load_settings()).events()

    return [raw_events]
