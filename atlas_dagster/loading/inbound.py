"""Loads one validated tenant-day: INSERT INTO {domain}_events_inbound SELECT ... FROM s3()."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.domains import Column, Domain, Kind
from atlas_dagster.exports.layout import DayExport, ExportSource, split_s3_uri
from atlas_dagster.loading import backfill_log
from atlas_dagster.resources.clickhouse import ClickHouseResource, ensure_schema
from atlas_dagster.tenants import Tenant
from atlas_dagster.validation.sample import check_sample
from atlas_dagster.validation.schema import DaySchema, check_schema

# Levers that keep the Null table + bridge MV path close to a bare INSERT (see `make bench`).
INSERT_SETTINGS: dict[str, int] = {
    # Measured best on 2 cores: parallel view processing added ~700 MB RSS on a 5M-row day for
    # one view, and 1M-row MV blocks slowed 1M-row days.
    "max_insert_threads": 2,
    "parallel_view_processing": 0,
    "min_insert_block_size_rows_for_materialized_views": 262_144,
    "min_insert_block_size_bytes_for_materialized_views": 0,
    # The export layout's organization_id=/brand_id= folders must never stand in for the
    # columns: the tenant guard has to see what the rows really hold.
    "use_hive_partitioning": 0,
}


class PartitionOutOfScope(ValueError):
    """The partition is outside the tenant's window or domains: refused with no log row."""


@dataclass(frozen=True)
class DayLoad:
    rows_loaded: int
    source_rows: int
    files: int
    bytes: int
    s3_path: str
    duration_seconds: float
    query_id: str
    attempt: int


def check_scope(tenant: Tenant, domain: Domain, day: dt.date) -> None:
    if domain.name not in tenant.domains:
        raise PartitionOutOfScope(
            f"tenant {tenant.key} does not list domain {domain.name!r} "
            f"(it lists {list(tenant.domains)})"
        )
    if not tenant.covers(day):
        raise PartitionOutOfScope(
            f"{day} is outside tenant {tenant.key}'s window "
            f"{tenant.start_date}..{tenant.last_date()}"
        )


def _structure(domain: Domain, day_schema: DaySchema) -> str:
    def ch_type(column: Column) -> str:
        base = {
            Kind.STRING: "String",
            Kind.TIMESTAMP: "DateTime64(6, 'UTC')",
            Kind.DOUBLE: "Float64",
            Kind.MONEY: "Float64"
            if column.name in day_schema.float_money_columns
            else "Decimal(18, 4)",
        }[column.kind]
        return f"Nullable({base})" if column.nullable else base

    return ", ".join(f"{c.name} {ch_type(c)}" for c in domain.columns)


def _select_expression(column: Column, day_schema: DaySchema) -> str:
    if column.name in day_schema.float_money_columns:
        # Through the shortest decimal text of the rounded double: 1.005 stays 1.0050.
        cast = "toDecimal64OrNull" if column.nullable else "toDecimal64"
        return f"{cast}(toString(round({column.name}, 4)), 4) AS {column.name}"
    return column.name


def _glob(day_export: DayExport) -> str:
    return day_export.day_uri + "/{" + ",".join(f.name for f in day_export.files) + "}"


def _source_function(tenant: Tenant, cluster: str | None) -> tuple[str, dict[str, str]]:
    if not tenant.is_s3:
        return "file({source_path:String}, 'Parquet', {structure:String})", {}
    credentials = tenant.s3.credentials()
    args = "{source_url:String}, "
    parameters: dict[str, str] = {}
    if credentials:
        args += "{access_key_id:String}, {secret_access_key:String}, "
        parameters = {"access_key_id": credentials[0], "secret_access_key": credentials[1]}
    args += "'Parquet', {structure:String}"
    if cluster:
        return f"s3Cluster({cluster}, {args})", parameters
    return f"s3({args})", parameters


def s3_http_url(tenant: Tenant, uri: str) -> str:
    bucket, key = split_s3_uri(uri)
    if tenant.s3.endpoint_url:
        return f"{tenant.s3.endpoint_url.rstrip('/')}/{bucket}/{key}"
    region = tenant.s3.region or "us-east-1"
    return f"https://{bucket}.s3.{region}.amazonaws.com/{key}"


def insert_statement(
    tenant: Tenant,
    domain: Domain,
    day: dt.date,
    day_export: DayExport,
    day_schema: DaySchema,
    cluster: str | None,
) -> tuple[str, dict[str, object]]:
    function, parameters = _source_function(tenant, cluster)
    glob = _glob(day_export)
    parameters |= {
        "structure": _structure(domain, day_schema),
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "partition_date": day,
        "event_types": list(domain.event_types),
    }
    if tenant.is_s3:
        parameters["source_url"] = s3_http_url(tenant, glob)
    else:
        parameters["source_path"] = glob[len("file://") :]
    statement = sql.query(
        "load_day",
        inbound_table=domain.inbound_table,
        columns=", ".join([*(c.name for c in domain.columns), "source_file"]),
        select_list=", ".join(_select_expression(c, day_schema) for c in domain.columns),
        source_function=function,
        settings=", ".join(f"{k} = {int(v)}" for k, v in INSERT_SETTINGS.items()),
    )
    return statement, parameters


def _day_parameters(tenant: Tenant, day: dt.date) -> dict[str, object]:
    return {
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "partition_date": day,
    }


def count_day(client: Client, domain: Domain, tenant: Tenant, day: dt.date) -> int:
    text = sql.query("count_day", raw_table=domain.raw_table)
    return int(client.command(text, parameters=_day_parameters(tenant, day)))


def clear_day(client: Client, domain: Domain, tenant: Tenant, day: dt.date) -> None:
    if count_day(client, domain, tenant, day):
        client.command(
            sql.query("delete_day", raw_table=domain.raw_table),
            parameters=_day_parameters(tenant, day),
        )


def load_day(
    clickhouse: ClickHouseResource,
    tenant: Tenant,
    domain: Domain,
    day: dt.date,
    run_id: str,
) -> DayLoad:
    """Validates, then loads one tenant-day; logs running → completed | failed and re-raises."""
    check_scope(tenant, domain, day)
    secrets: tuple = ()
    entry = backfill_log.LogEntry(tenant.organization_id, tenant.brand_id, domain.name, day, run_id)
    started = time.monotonic()
    day_export: DayExport | None = None
    try:
        secrets = tenant.s3.credentials() or ()
        source = ExportSource(tenant)
        day_export = source.list_day(domain.name, day)
        day_schema = check_schema(day_export, domain, tenant, day)
        check_sample(source, day_export, domain, tenant, day)
    except Exception as exc:
        entry.s3_path = day_export.day_uri if day_export else ""
        _log_failure(clickhouse, entry, exc, secrets)
        raise
    entry.s3_path, entry.files = day_export.day_uri, len(day_export.files)
    entry.bytes, entry.source_rows = day_export.bytes, day_export.num_rows
    entry.query_id = f"atlas-{uuid.uuid4()}"
    statement, parameters = insert_statement(
        tenant, domain, day, day_export, day_schema, clickhouse.resolved_cluster()
    )
    with clickhouse.session() as client:
        ensure_schema(client)
        entry.attempt = backfill_log.previous_attempt(client, entry) + 1
        backfill_log.write(client, entry, "running")
        try:
            clear_day(client, domain, tenant, day)
            client.command(statement, parameters=parameters, settings={"query_id": entry.query_id})
            entry.rows_loaded = count_day(client, domain, tenant, day)
        except BaseException as exc:
            _record_failure(client, clickhouse, entry, exc, secrets, domain, tenant)
            raise
        backfill_log.write(client, entry, "completed")
    return DayLoad(
        entry.rows_loaded,
        entry.source_rows,
        entry.files,
        entry.bytes,
        entry.s3_path,
        time.monotonic() - started,
        entry.query_id,
        entry.attempt,
    )


def failure_message(clickhouse: ClickHouseResource, exc: BaseException, secrets: tuple) -> str:
    return clickhouse.redact(f"{type(exc).__name__}: {exc}", tuple(secrets))[:4000]


def _record_failure(
    client: Client,
    clickhouse: ClickHouseResource,
    entry: backfill_log.LogEntry,
    exc: BaseException,
    secrets: tuple,
    domain: Domain,
    tenant: Tenant,
) -> None:
    """Leaves no half-written day behind: partial rows are cleared before 'failed' is logged."""
    entry.error_message = failure_message(clickhouse, exc, secrets)
    try:
        clear_day(client, domain, tenant, entry.partition_date)
    finally:
        backfill_log.write(client, entry, "failed")


def _log_failure(
    clickhouse: ClickHouseResource, entry: backfill_log.LogEntry, exc: BaseException, secrets: tuple
) -> None:
    entry.error_message = failure_message(clickhouse, exc, secrets)
    with clickhouse.session() as client:
        ensure_schema(client)
        entry.attempt = backfill_log.previous_attempt(client, entry) + 1
        backfill_log.write(client, entry, "failed")
