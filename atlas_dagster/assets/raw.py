"""Raw assets tbt_raw_events_<domain>: one tenant-day per partition, loaded inside ClickHouse."""

from dagster import AssetExecutionContext, AssetsDefinition, MaterializeResult, MetadataValue, asset

from atlas_dagster.domains import DOMAINS, Domain
from atlas_dagster.loading.inbound import load_day
from atlas_dagster.partitions import split_key
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import Tenant, tenant_by_key

RAW_GROUP = "raw"
INSERT_POOL = "atlas_insert"


def raw_asset(domain: Domain, tenants: list[Tenant], partitions_def) -> AssetsDefinition:
    @asset(
        name=domain.raw_table,
        group_name=RAW_GROUP,
        partitions_def=partitions_def,
        pool=INSERT_POOL,
        kinds={"clickhouse", "parquet"},
        description=(
            f"Historical {domain.name} events ({', '.join(domain.event_types)}) loaded "
            "per tenant-day "
            f"from the Parquet export through atlas.{domain.inbound_table} (Null) and "
            f"atlas.{domain.bridge_view}. Read with FINAL."
        ),
    )
    def _raw(context: AssetExecutionContext, clickhouse: ClickHouseResource) -> MaterializeResult:
        day, tenant_key = split_key(context.partition_key)
        tenant = tenant_by_key(tenants, tenant_key)
        loaded = load_day(clickhouse, tenant, domain, day, context.run.run_id)
        context.log.info(
            f"{domain.raw_table} {tenant.key} {day}: {loaded.rows_loaded} rows from "
            f"{loaded.files} files in {loaded.duration_seconds:.2f}s"
        )
        return MaterializeResult(
            metadata={
                "rows_loaded": MetadataValue.int(loaded.rows_loaded),
                "source_rows": MetadataValue.int(loaded.source_rows),
                "files": MetadataValue.int(loaded.files),
                "bytes": MetadataValue.int(loaded.bytes),
                "s3_path": MetadataValue.path(loaded.s3_path),
                "duration_seconds": MetadataValue.float(round(loaded.duration_seconds, 3)),
                "clickhouse_query_id": MetadataValue.text(loaded.query_id),
                "attempt": MetadataValue.int(loaded.attempt),
            }
        )

    return _raw


def raw_assets(tenants: list[Tenant], partitions_def) -> list[AssetsDefinition]:
    return [raw_asset(domain, tenants, partitions_def) for domain in DOMAINS.values()]
