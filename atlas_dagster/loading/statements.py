"""The load's SQL: each statement's text and bound parameters, from a tenant, domain, day and files.

Pure: no client, no clock, no environment (the S3 keys come in as arguments); it reads only the
package's .sql files through atlas_dagster.sql. Every value is a bound parameter; only
identifiers and expressions from the domain contract and the row rules, INSERT_SETTINGS and the
cluster name the caller resolved are spliced into the text.
"""

from __future__ import annotations

import datetime as dt

from atlas_dagster import sql
from atlas_dagster.domains import Column, Domain, Kind
from atlas_dagster.exports.layout import DayExport, split_s3_uri
from atlas_dagster.tenants import Tenant
from atlas_dagster.validation import rows
from atlas_dagster.validation.schema import DaySchema

# A statement's text and the values bound to its {name:Type} placeholders.
Statement = tuple[str, dict[str, object]]

# Levers that keep the Null table + bridge MV path as fast as a bare INSERT; each one's runs are
# in docs/benchmarks.md. Without parallel view processing the MV path used one core (5M-row day:
# 3.8-4.9 s against 2.3-2.7 s bare); with it and 4 insert threads, 2.4-2.7 s.
INSERT_SETTINGS: dict[str, int] = {
    "max_insert_threads": 4,
    "parallel_view_processing": 1,
    "min_insert_block_size_rows_for_materialized_views": 262_144,
    "min_insert_block_size_bytes_for_materialized_views": 0,
    # The export layout's organization_id=/brand_id= folders must never stand in for the
    # columns: the tenant guard has to see what the rows really hold.
    "use_hive_partitioning": 0,
    # A null in a required (non-Nullable) column stops the read instead of becoming '' or 0:
    # the row rule "required columns hold a value in every row" at no cost per row.
    "input_format_null_as_default": 0,
    # The row guards never filter a row (they pass or refuse the day), so pushing them down to
    # the Parquet reader or into PREWHERE can skip nothing and only costs (+12 ms CPU a 5k-row
    # day against +2.6 ms: docs/benchmarks.md, small days, step 3).
    "input_format_parquet_filter_push_down": 0,
    "input_format_parquet_bloom_filter_push_down": 0,
    "optimize_move_to_prewhere": 0,
    # No replacing merge of each block as it is written: every reader of a raw table dedups
    # itself (FINAL, or argMax over ingested_at), and rows of one day in different blocks were
    # never merged at insert anyway. A 5M-row day: 2.00 s wall / 3.72 s CPU against 2.85 / 5.32
    # with it (docs/benchmarks.md, large days, step 8).
    "optimize_on_insert": 0,
}


def _structure(domain: Domain, day_schema: DaySchema, all_nullable: bool = False) -> str:
    """The files' columns as the INSERT reads them; the diagnosis reads them all Nullable."""

    def ch_type(column: Column) -> str:
        base = {
            Kind.STRING: "String",
            # An integer id (INT64, DECIMAL(38, 0)) read as String is its exact decimal text:
            # the engine converts it (chDB 26.9: 12345678901234 → '12345678901234').
            Kind.ID: "String",
            Kind.TIMESTAMP: "DateTime64(6, 'UTC')",
            Kind.DOUBLE: "Float64",
            Kind.MONEY: "Float64"
            if column.name in day_schema.float_money_columns
            else day_schema.decimal_type(column.name) or "Decimal(18, 4)",
        }[column.kind]
        return f"Nullable({base})" if column.nullable or all_nullable else base

    read = [c for c in domain.columns if c.name not in day_schema.from_folders]
    return ", ".join(f"{c.name} {ch_type(c)}" for c in read)


def folder_columns(day_schema: DaySchema) -> str:
    """The WITH clause naming each column the day's files hold only in their folder names
    (Spark's partitionBy), read from the path of the file each row comes from, inside the
    engine. Its name is the contract's, so the guards hold the value stored to the rules.

    Not use_hive_partitioning: chDB 26.9 then lets a folder's value replace the column a file
    holds too (a file of rows `organization_id = 'evil'` under organization_id=acme/ reads as
    'acme'), and the tenant guard must see what a file really holds."""
    if not day_schema.from_folders:
        return ""
    columns = (
        f"decodeURLComponent(extract(_path, '.*/{name}=([^/]*)/')) AS {name}"
        for name in sorted(day_schema.from_folders)
    )
    return "WITH " + ", ".join(columns)


def _select_expression(column: Column, day_schema: DaySchema) -> str:
    if column.name in day_schema.float_money_columns:
        # Through the shortest decimal text of the rounded double: 1.005 stays 1.0050.
        cast = "toDecimal64OrNull" if column.nullable else "toDecimal64"
        # Aliased apart from the column: the guards in WHERE must see the file's double.
        return f"{cast}(toString(round({column.name}, 4)), 4) AS {column.name}_decimal"
    return column.name


def _glob(day_export: DayExport) -> str:
    return day_export.day_uri + "/{" + ",".join(f.name for f in day_export.files) + "}"


def _source_function(
    tenant: Tenant, credentials: tuple[str, ...], cluster: str | None
) -> tuple[str, dict[str, str]]:
    if not tenant.is_s3:
        return "file({source_path:String}, 'Parquet', {structure:String})", {}
    args = "{source_url:String}, "
    parameters: dict[str, str] = {}
    if credentials:
        args += "{access_key_id:String}, {secret_access_key:String}, "
        parameters = {"access_key_id": credentials[0], "secret_access_key": credentials[1]}
    args += "'Parquet', {structure:String}"
    if cluster:
        return f"s3Cluster({cluster}, {args})", parameters
    return f"s3({args})", parameters


def _source(
    tenant: Tenant,
    day_export: DayExport,
    structure: str,
    credentials: tuple[str, ...],
    cluster: str | None,
) -> Statement:
    """The table function reading exactly the day's validated files, and its bound parameters."""
    function, parameters = _source_function(tenant, credentials, cluster)
    glob = _glob(day_export)
    if tenant.is_s3:
        return function, {
            **parameters,
            "structure": structure,
            "source_url": tenant.s3.object_url(*split_s3_uri(glob)),
        }
    return function, {**parameters, "structure": structure, "source_path": glob[len("file://") :]}


def day_parameters(tenant: Tenant, day: dt.date) -> dict[str, object]:
    return {
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "partition_date": day,
    }


def rule_parameters(tenant: Tenant, domain: Domain, day: dt.date) -> dict[str, object]:
    """What the row rules bind: the tenant's ids, the UTC day and the domain's event types."""
    return rows.rule_parameters((tenant.organization_id, tenant.brand_id), day, domain)


def insert_statement(
    tenant: Tenant,
    domain: Domain,
    day: dt.date,
    day_export: DayExport,
    day_schema: DaySchema,
    credentials: tuple[str, ...],
    cluster: str | None,
) -> Statement:
    """The day's one INSERT into the inbound Null table, every row held to the row rules."""
    function, parameters = _source(
        tenant, day_export, _structure(domain, day_schema), credentials, cluster
    )
    parameters |= rule_parameters(tenant, domain, day)
    statement = sql.query(
        "load_day",
        inbound_table=domain.inbound_table,
        folder_columns=folder_columns(day_schema),
        columns=", ".join([*(c.name for c in domain.columns), "source_file"]),
        select_list=", ".join(_select_expression(c, day_schema) for c in domain.columns),
        source_function=function,
        guards=rows.guards(rows.value_rules(domain, day_schema)),
        settings=", ".join(f"{k} = {int(v)}" for k, v in INSERT_SETTINGS.items()),
    )
    return statement, parameters


def diagnosis_source(
    tenant: Tenant,
    day_export: DayExport,
    domain: Domain,
    day_schema: DaySchema,
    credentials: tuple[str, ...],
    cluster: str | None,
) -> Statement:
    """The table function a diagnosis reads the export's files through, every column Nullable."""
    structure = _structure(domain, day_schema, all_nullable=True)
    return _source(tenant, day_export, structure, credentials, cluster)


def export_count_statement(
    tenant: Tenant, day_export: DayExport, credentials: tuple[str, ...], cluster: str | None
) -> Statement:
    """(rows, distinct event_ids) of the day's export files, reading only event_id."""
    function, parameters = _source(
        tenant, day_export, "event_id Nullable(String)", credentials, cluster
    )
    return sql.query("count_export", source_function=function), parameters


def count_day_statement(domain: Domain, tenant: Tenant, day: dt.date) -> Statement:
    """Distinct events of the tenant-day in the raw table (FINAL)."""
    return sql.query("count_day", raw_table=domain.raw_table), day_parameters(tenant, day)


def rows_exist_statement(domain: Domain, tenant: Tenant, day: dt.date) -> Statement:
    """Whether the tenant-day still holds backfilled rows (the DELETE's work, if any)."""
    return sql.query("backfill_rows_exist", raw_table=domain.raw_table), day_parameters(tenant, day)


def delete_day_statement(
    domain: Domain,
    tenant: Tenant,
    day: dt.date,
    until: dt.datetime | None = None,
    since: dt.datetime | None = None,
) -> Statement:
    """Deletes the tenant-day's backfilled rows (other ingestion paths stay): all of them, or
    those ingested `until` an instant (a reload's previous rows) or `since` it (its own)."""
    parameters = day_parameters(tenant, day)
    loaded = ""
    if until is not None:
        loaded, parameters["loaded"] = "AND ingested_at <= {loaded:DateTime64(6, 'UTC')}", until
    elif since is not None:
        loaded, parameters["loaded"] = "AND ingested_at > {loaded:DateTime64(6, 'UTC')}", since
    return sql.query("delete_day", raw_table=domain.raw_table, loaded=loaded), parameters


def _tenant_ids(tenant: Tenant) -> dict[str, object]:
    return {"organization_id": tenant.organization_id, "brand_id": tenant.brand_id}


def previous_attempts_statement(
    tenant: Tenant, domains: list[Domain], days: list[dt.date]
) -> Statement:
    """The last attempt logged for each (domain, day) of the tenant's run, in one read."""
    parameters = _tenant_ids(tenant) | {"domains": [d.name for d in domains], "dates": days}
    return sql.query("previous_attempts"), parameters


def backfill_days_statement(tenant: Tenant, domain: Domain, days: list[dt.date]) -> Statement:
    """Which of the days still hold backfilled rows in the domain's raw table."""
    parameters = _tenant_ids(tenant) | {"dates": days}
    return sql.query("backfill_days", raw_table=domain.raw_table), parameters


def kill_query_statement(query_id: str) -> Statement:
    return sql.query("kill_query"), {"query_id": query_id}
