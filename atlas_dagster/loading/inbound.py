"""Loads one validated tenant-day: INSERT INTO {domain}_events_inbound SELECT ... FROM s3()."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.core.phases import PhaseTimer
from atlas_dagster.domains import Column, Domain, Kind
from atlas_dagster.exports.layout import DayExport, ExportSource, day_folder, split_s3_uri
from atlas_dagster.loading import backfill_log
from atlas_dagster.loading.errors import (
    LoadCanceled,
    LoadMismatchError,
    OutsideDomainWindow,
    PartitionOutOfScope,
)
from atlas_dagster.loading.faults import classify
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import run_command
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.tenants import Tenant
from atlas_dagster.validation import rows
from atlas_dagster.validation.schema import DaySchema, check_schema

# Levers that keep the Null table + bridge MV path as fast as a bare INSERT (see `make bench`).
# Measured on 2 cores, chDB 26.9, fresh engine per run: without parallel view processing the MV
# path used about one core (5M-row day: 3.8-4.9 s against 2.3-2.7 s bare); with it and 4 insert
# threads, 2.4-2.7 s at the bare INSERT's peak RSS (2.5 GB); 2M rows 1.24-1.51 s (bare
# 1.18-1.50 s, 2 threads and no view parallelism 1.97-2.19 s); 1M rows equal within noise.
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
    # the Parquet reader (row-group statistics, bloom filters) or into PREWHERE can skip nothing
    # and only costs: on 5k-row days, interleaved, guards cost +12 ms CPU a day with push-down
    # and PREWHERE, +2.6 ms without (32.0 ms without guards).
    "input_format_parquet_filter_push_down": 0,
    "input_format_parquet_bloom_filter_push_down": 0,
    "optimize_move_to_prewhere": 0,
    # No replacing merge of each block as it is written: every reader of a raw table dedups
    # itself (FINAL, or argMax over ingested_at), and rows of one day that land in different
    # blocks were never merged at insert anyway. Measured on a 5M-row day, 5 fresh engines each,
    # interleaved: INSERT 2.00 s wall / 3.72 s CPU against 2.85 / 5.32 with it (bare INSERT
    # with the engine's default: 2.69 / 4.90). The FINAL reads of the day pay a little until a
    # merge (3 engines each): count 0.01 -> 0.04 s on a 1M-row day, 0.22 -> 0.24 s at 5M.
    "optimize_on_insert": 0,
}


@dataclass(frozen=True)
class DayLoad:
    rows_loaded: int
    source_rows: int
    duplicate_rows: int
    files: int
    bytes: int
    s3_path: str
    duration_seconds: float
    insert_seconds: float
    query_id: str
    attempt: int
    phases: PhaseTimer


@dataclass
class PreparedDay:
    """A validated tenant-day, ready for its INSERT."""

    tenant: Tenant
    domain: Domain
    day: dt.date
    day_export: DayExport
    day_schema: DaySchema
    secrets: tuple[str, ...]
    prepared_at: float = field(default_factory=time.monotonic)
    query_id: str = field(default_factory=lambda: f"atlas-{uuid.uuid4()}")
    # Validation's phases, then the load's and (through after_load) the checks'.
    timer: PhaseTimer = field(default_factory=PhaseTimer)


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
    if not tenant.covers(day, domain.name):
        first, last = tenant.window(domain.name)
        raise OutsideDomainWindow(
            f"{day} is outside domain {domain.name}'s own window {first}..{last} "
            f"(tenant {tenant.key})"
        )


def _structure(domain: Domain, day_schema: DaySchema, all_nullable: bool = False) -> str:
    """The files' columns as the INSERT reads them; the diagnosis reads them all Nullable."""

    def ch_type(column: Column) -> str:
        base = {
            Kind.STRING: "String",
            Kind.TIMESTAMP: "DateTime64(6, 'UTC')",
            Kind.DOUBLE: "Float64",
            Kind.MONEY: "Float64"
            if column.name in day_schema.float_money_columns
            else day_schema.decimal_type(column.name) or "Decimal(18, 4)",
        }[column.kind]
        return f"Nullable({base})" if column.nullable or all_nullable else base

    return ", ".join(f"{c.name} {ch_type(c)}" for c in domain.columns)


def _select_expression(column: Column, day_schema: DaySchema) -> str:
    if column.name in day_schema.float_money_columns:
        # Through the shortest decimal text of the rounded double: 1.005 stays 1.0050.
        cast = "toDecimal64OrNull" if column.nullable else "toDecimal64"
        # Aliased apart from the column: the guards in WHERE must see the file's double.
        return f"{cast}(toString(round({column.name}, 4)), 4) AS {column.name}_decimal"
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


def _source(
    tenant: Tenant, day_export: DayExport, structure: str, cluster: str | None
) -> tuple[str, dict[str, object]]:
    """The table function reading exactly the day's validated files, and its bound parameters."""
    function, parameters = _source_function(tenant, cluster)
    glob = _glob(day_export)
    if tenant.is_s3:
        return function, {
            **parameters,
            "structure": structure,
            "source_url": tenant.s3.object_url(*split_s3_uri(glob)),
        }
    return function, {**parameters, "structure": structure, "source_path": glob[len("file://") :]}


def insert_statement(prepared: PreparedDay, cluster: str | None) -> tuple[str, dict[str, object]]:
    tenant, domain, day_schema = prepared.tenant, prepared.domain, prepared.day_schema
    function, parameters = _source(
        tenant, prepared.day_export, _structure(domain, day_schema), cluster
    )
    parameters |= _rule_parameters(prepared)
    statement = sql.query(
        "load_day",
        inbound_table=domain.inbound_table,
        columns=", ".join([*(c.name for c in domain.columns), "source_file"]),
        select_list=", ".join(_select_expression(c, day_schema) for c in domain.columns),
        source_function=function,
        guards=rows.guards(rows.value_rules(domain, day_schema)),
        settings=", ".join(f"{k} = {int(v)}" for k, v in INSERT_SETTINGS.items()),
    )
    return statement, parameters


def _rule_parameters(prepared: PreparedDay) -> dict[str, object]:
    tenant = prepared.tenant
    return rows.rule_parameters(
        (tenant.organization_id, tenant.brand_id), prepared.day, prepared.domain
    )


def diagnosis_source(
    tenant: Tenant,
    day_export: DayExport,
    domain: Domain,
    day_schema: DaySchema,
    cluster: str | None,
) -> tuple[str, dict[str, object]]:
    """The table function a diagnosis reads the export's files through, every column Nullable."""
    return _source(tenant, day_export, _structure(domain, day_schema, all_nullable=True), cluster)


def diagnose_rows(
    client: Client, prepared: PreparedDay, cluster: str | None
) -> list[rows.Violation]:
    """After a failed INSERT: the row rules each file breaks, read again inside ClickHouse."""
    domain, day_schema = prepared.domain, prepared.day_schema
    function, parameters = diagnosis_source(
        prepared.tenant, prepared.day_export, domain, day_schema, cluster
    )
    found = rows.diagnose(
        client,
        function,
        parameters | _rule_parameters(prepared),
        rows.null_rules(domain) + rows.value_rules(domain, day_schema),
    )
    # _path is the engine's view of a file (a local path, or bucket/key): name its export URI.
    by_name = {f.uri.rsplit("/", 1)[-1]: f.uri for f in prepared.day_export.files}
    return [replace(v, file=by_name.get(v.file.rsplit("/", 1)[-1], v.file)) for v in found]


def _day_parameters(tenant: Tenant, day: dt.date) -> dict[str, object]:
    return {
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "partition_date": day,
    }


def count_day(client: Client, domain: Domain, tenant: Tenant, day: dt.date) -> int:
    text = sql.query("count_day", raw_table=domain.raw_table)
    return int(run_command(client, text, _day_parameters(tenant, day)))


def clear_day(client: Client, domain: Domain, tenant: Tenant, day: dt.date) -> None:
    """Deletes the tenant-day's backfilled rows, if it has any (other ingestion paths stay)."""
    present = sql.query("backfill_rows_exist", raw_table=domain.raw_table)
    if int(run_command(client, present, _day_parameters(tenant, day))):
        run_command(
            client,
            sql.query("delete_day", raw_table=domain.raw_table),
            _day_parameters(tenant, day),
        )


def duplicate_rows(client: Client, prepared: PreparedDay, cluster: str | None) -> tuple[int, int]:
    """(rows, distinct event_ids) of the day's export, counted inside ClickHouse."""
    function, parameters = _source(
        prepared.tenant, prepared.day_export, "event_id Nullable(String)", cluster
    )
    result = client.query(
        sql.query("count_export", source_function=function), parameters=parameters
    )
    export_rows, export_events = result.result_rows[0]
    return int(export_rows), int(export_events)


def prepare_day(
    clickhouse: ClickHouseResource, tenant: Tenant, domain: Domain, day: dt.date, run_id: str
) -> PreparedDay:
    """Validates the day's export before anything is written; a failure is logged and re-raised."""
    check_scope(tenant, domain, day)
    secrets: tuple[str, ...] = ()
    day_export: DayExport | None = None
    timer = PhaseTimer()
    try:
        secrets = tenant.s3.credentials() or ()
        source = ExportSource(tenant)
        with timer.phase("list_and_footers"):
            day_export = source.list_day(domain.name, day)
        with timer.phase("check_schema"):
            day_schema = check_schema(day_export, domain, tenant, day)
    except Exception as exc:
        entry = backfill_log.LogEntry(
            tenant.organization_id, tenant.brand_id, domain.name, day, run_id
        )
        entry.s3_path = day_export.day_uri if day_export else day_folder(tenant, domain.name, day)
        _log_failure(clickhouse, entry, exc, secrets)
        raise
    return PreparedDay(tenant, domain, day, day_export, day_schema, secrets, timer=timer)


@dataclass
class KnownDays:
    """What a run reads once, in bulk, for all its tenant-days instead of once per day: the last
    attempt number of each (domain, day), and which days still hold backfilled rows (only those
    need a clear before their INSERT). Measured: 5 + 5 ms per tenant-day read one by one.

    A day another process loads after this read is not cleared first; that cannot end in a wrong
    'completed': rows_loaded is counted with FINAL after the INSERT, and rows the export no longer
    holds make it differ from the footers, so the day fails and its rows are cleared."""

    attempts: dict[tuple[str, dt.date], int]
    with_rows: set[tuple[str, dt.date]]

    def attempt(self, domain: Domain, day: dt.date) -> int:
        return self.attempts.get((domain.name, day), 0) + 1


def known_days(
    client: Client, tenant: Tenant, domains: list[Domain], days: list[dt.date]
) -> KnownDays:
    ids = {"organization_id": tenant.organization_id, "brand_id": tenant.brand_id}
    result = client.query(
        sql.query("previous_attempts"),
        parameters=ids | {"domains": [d.name for d in domains], "dates": days},
    )
    attempts = {(domain, day): int(attempt) for domain, day, attempt in result.result_rows}
    with_rows = set()
    for domain in domains:
        found = client.query(
            sql.query("backfill_days", raw_table=domain.raw_table),
            parameters=ids | {"dates": days},
        )
        with_rows |= {(domain.name, day) for (day,) in found.result_rows}
    return KnownDays(attempts, with_rows)


def insert_day(
    clickhouse: ClickHouseResource,
    prepared: PreparedDay,
    run_id: str,
    canceled: threading.Event | None = None,
    after_load: Callable[[Client, backfill_log.LogEntry], None] | None = None,
    known: KnownDays | None = None,
) -> DayLoad:
    """Holds the engine for one day: running → INSERT → count → completed | failed (re-raised).

    `after_load(client, entry)` runs in the same engine session once 'completed' is logged, with
    the row just written (the day's checks), so that a day costs one session and one count of the
    raw table. `known` is the run's bulk read of attempts and days with rows (read here for this
    day without it).
    Each step's time goes to `prepared.timer`; insert_seconds is the INSERT statement alone.
    """
    tenant, domain, day = prepared.tenant, prepared.domain, prepared.day
    day_export = prepared.day_export
    entry = backfill_log.LogEntry(tenant.organization_id, tenant.brand_id, domain.name, day, run_id)
    entry.s3_path, entry.files = day_export.day_uri, len(day_export.files)
    entry.bytes, entry.source_rows = day_export.bytes, day_export.num_rows
    entry.query_id = prepared.query_id
    cluster = clickhouse.resolved_cluster()
    statement, parameters = insert_statement(prepared, cluster)
    timer = prepared.timer
    with contextlib.ExitStack() as engine:
        engine.enter_context(clickhouse.day_exclusion(tenant.key, domain.name, day))
        with timer.phase("insert_room_wait"):
            label = f"{domain.raw_table} {tenant.key} {day}"
            engine.enter_context(clickhouse.insert_room(day_export.bytes, label))
        client = engine.enter_context(clickhouse.session(timer))
        with timer.phase("ensure_schema"):
            ensure_schema(client)
        with timer.phase("previous_attempt"):
            if known is None:
                known = known_days(client, tenant, [domain], [day])
            entry.attempt = known.attempt(domain, day)
        with timer.phase("log_running"):
            backfill_log.write(client, entry, "running")
        try:
            if (domain.name, day) in known.with_rows:
                with timer.phase("clear_day"):
                    clear_day(client, domain, tenant, day)
            insert_started = time.monotonic()
            # A day with no events in a complete export has no file to read: it is cleared,
            # counted (0) and logged completed like any other day.
            if day_export.files:
                with timer.phase("insert"):
                    _insert(client, prepared, statement, parameters, cluster, canceled)
            insert_seconds = time.monotonic() - insert_started
            if canceled is not None and canceled.is_set():
                raise LoadCanceled("the Dagster run was canceled during the INSERT")
            with timer.phase("count_day"):
                entry.rows_loaded = count_day(client, domain, tenant, day)
            with timer.phase("explain_difference"):
                entry.duplicate_rows = _explain_difference(client, prepared, entry, cluster)
        except BaseException as exc:
            failure = exc
            if canceled is not None and canceled.is_set() and not isinstance(exc, LoadCanceled):
                failure = LoadCanceled(f"the Dagster run was canceled during the INSERT ({exc})")
            _record_failure(client, clickhouse, entry, failure, prepared.secrets, domain, tenant)
            if failure is exc:
                raise
            raise failure from exc
        with timer.phase("log_completed"):
            backfill_log.write(client, entry, "completed")
        if after_load is not None:
            after_load(client, entry)
    return DayLoad(
        rows_loaded=entry.rows_loaded,
        source_rows=entry.source_rows,
        duplicate_rows=entry.duplicate_rows,
        files=entry.files,
        bytes=entry.bytes,
        s3_path=entry.s3_path,
        duration_seconds=time.monotonic() - prepared.prepared_at,
        insert_seconds=insert_seconds,
        query_id=entry.query_id,
        attempt=entry.attempt,
        phases=timer,
    )


def _insert(
    client: Client,
    prepared: PreparedDay,
    statement: str,
    parameters: dict[str, object],
    cluster: str | None,
    canceled: threading.Event | None,
) -> None:
    """The INSERT; when it fails on the day's data, the error names the files, columns and rows.

    The guards' messages are constants (rule and column); only on this failure path are the
    files read once more, grouped by file, to say where. A failure the rows do not explain (an
    unreachable source, a full disk, a cancel) is re-raised as it came.
    """
    try:
        run_command(client, statement, parameters, settings={"query_id": prepared.query_id})
    except Exception as exc:
        if classify(exc).transient:
            # The service pushed back (TOO_MANY_PARTS, S3 503, …): rows cannot explain that, and
            # a second read of the whole day would only add to its load before the retry.
            raise

        if canceled is not None and canceled.is_set():
            raise
        uris = [f.uri for f in prepared.day_export.files]
        unreadable = rows.unreadable_value(exc, prepared.day, prepared.domain, uris)
        if unreadable is not None:
            raise unreadable from exc
        try:
            violations = diagnose_rows(client, prepared, cluster)
        except Exception:
            raise exc from None
        if not violations:
            raise
        raise rows.RowContractError(
            rows.describe(prepared.day, prepared.domain, violations)
        ) from exc


def _explain_difference(
    client: Client, prepared: PreparedDay, entry: backfill_log.LogEntry, cluster: str | None
) -> int:
    """Returns the export's duplicate rows; raises when they do not explain a shortfall."""
    if entry.rows_loaded == entry.source_rows:
        return 0
    export_rows, export_events = duplicate_rows(client, prepared, cluster)
    if entry.rows_loaded != export_events or export_rows != entry.source_rows:
        raise LoadMismatchError(
            f"{prepared.domain.raw_table} holds {entry.rows_loaded} distinct events for "
            f"{prepared.tenant.key} {prepared.day}, but the export has {export_events} distinct "
            f"event_ids in {export_rows} rows (footers: {entry.source_rows})"
        )
    return export_rows - export_events


def load_day(
    clickhouse: ClickHouseResource,
    tenant: Tenant,
    domain: Domain,
    day: dt.date,
    run_id: str,
) -> DayLoad:
    """Validates, then loads one tenant-day; logs running → completed | failed and re-raises."""
    prepared = prepare_day(clickhouse, tenant, domain, day, run_id)
    return insert_day(clickhouse, prepared, run_id)


def kill_insert(clickhouse: ClickHouseResource, query_id: str) -> None:
    """Stops an in-flight INSERT on a server; the embedded engine runs it in this process."""
    if clickhouse.is_embedded():
        return
    with clickhouse.session() as client:
        run_command(client, sql.query("kill_query"), {"query_id": query_id})


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
