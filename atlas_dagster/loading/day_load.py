"""A tenant-day's load lifecycle: validate, then running → clear → INSERT → count → completed.

Nothing is written before the day validates (a validation failure logs 'failed' and re-raises).
Once 'running' is logged, the attempt ends 'completed' or 'failed' (re-raised), and a failed
attempt's partial rows are cleared before 'failed' is logged. The day's exclusion, its room among
the INSERTs in flight and one engine session are held from 'running' to the after-load hook.
Statement text and parameters come from statements.py; this module runs them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from clickhouse_connect.driver.client import Client

from atlas_dagster.core.phases import PhaseTimer
from atlas_dagster.domains import Domain
from atlas_dagster.exports.layout import DayExport, ExportSource, day_folder
from atlas_dagster.loading import backfill_log
from atlas_dagster.loading.errors import LoadCanceled, LoadMismatchError
from atlas_dagster.loading.faults import classify
from atlas_dagster.loading.statements import (
    Statement,
    backfill_days_statement,
    count_day_statement,
    delete_day_statement,
    diagnosis_source,
    export_count_statement,
    folder_columns,
    insert_statement,
    kill_query_statement,
    previous_attempts_statement,
    rows_exist_statement,
    rule_parameters,
)
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import run_command
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.scope import check_scope
from atlas_dagster.tenants import Tenant
from atlas_dagster.validation import rows
from atlas_dagster.validation.schema import DaySchema, check_schema

# Runs in the load's engine session once 'completed' is logged, with the row just written.
AfterLoad = Callable[[Client, backfill_log.LogEntry], None]


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
    secrets: tuple[str, ...]  # the S3 keys validation read: what failure messages redact
    prepared_at: float = field(default_factory=time.monotonic)
    query_id: str = field(default_factory=lambda: f"atlas-{uuid.uuid4()}")
    # Validation's phases, then the load's and (through after_load) the checks'.
    timer: PhaseTimer = field(default_factory=PhaseTimer)


def _credentials(tenant: Tenant) -> tuple[str, ...]:
    """The S3 keys as the environment holds them now, not as validation read them: a key
    rotated since then is the one each statement must use (and fail with, if wrong)."""
    return tenant.s3.credentials() or ()


def diagnose_rows(
    client: Client, prepared: PreparedDay, cluster: str | None
) -> list[rows.Violation]:
    """After a failed INSERT: the row rules each file breaks, read again inside ClickHouse."""
    tenant, domain, day_schema = prepared.tenant, prepared.domain, prepared.day_schema
    function, parameters = diagnosis_source(
        tenant, prepared.day_export, domain, day_schema, _credentials(tenant), cluster
    )
    found = rows.diagnose(
        client,
        function,
        parameters | rule_parameters(tenant, domain, prepared.day),
        rows.null_rules(domain) + rows.value_rules(domain, day_schema),
        folder_columns(day_schema),
    )
    # _path is the engine's view of a file (a local path, or bucket/key): name its export URI.
    by_name = {f.uri.rsplit("/", 1)[-1]: f.uri for f in prepared.day_export.files}
    return [replace(v, file=by_name.get(v.file.rsplit("/", 1)[-1], v.file)) for v in found]


def count_day(client: Client, domain: Domain, tenant: Tenant, day: dt.date) -> int:
    text, parameters = count_day_statement(domain, tenant, day)
    return int(run_command(client, text, parameters))


def clear_day(
    client: Client,
    domain: Domain,
    tenant: Tenant,
    day: dt.date,
    until: dt.datetime | None = None,
    since: dt.datetime | None = None,
) -> None:
    """Deletes the tenant-day's backfilled rows, if it has any (other ingestion paths stay):
    all of them, or those ingested `until` an instant, or `since` it."""
    present, parameters = rows_exist_statement(domain, tenant, day)
    if int(run_command(client, present, parameters)):
        delete, parameters = delete_day_statement(domain, tenant, day, until, since)
        run_command(client, delete, parameters)


def duplicate_rows(client: Client, prepared: PreparedDay, cluster: str | None) -> tuple[int, int]:
    """(rows, distinct event_ids) of the day's export, counted inside ClickHouse."""
    tenant = prepared.tenant
    text, parameters = export_count_statement(
        tenant, prepared.day_export, _credentials(tenant), cluster
    )
    result = client.query(text, parameters=parameters)
    export_rows, export_events = result.result_rows[0]
    return int(export_rows), int(export_events)


def _new_entry(tenant: Tenant, domain: Domain, day: dt.date, run_id: str) -> backfill_log.LogEntry:
    return backfill_log.LogEntry(tenant.organization_id, tenant.brand_id, domain.name, day, run_id)


def prepare_day(
    clickhouse: ClickHouseResource,
    tenant: Tenant,
    domain: Domain,
    day: dt.date,
    run_id: str,
    source: ExportSource | None = None,
) -> PreparedDay:
    """Validates the day's export before anything is written; a failure is logged and re-raised.
    `source`: the tenant's export reader when the caller loads several of its days."""
    check_scope(tenant, domain, day)
    secrets: tuple[str, ...] = ()
    day_export: DayExport | None = None
    timer = PhaseTimer()
    try:
        secrets = tenant.s3.credentials() or ()
        source = source or ExportSource(tenant)
        with timer.phase("list_and_footers"):
            day_export = source.list_day(domain.name, day)
        with timer.phase("check_schema"):
            day_schema = check_schema(day_export, domain, tenant, day)
    except Exception as exc:
        entry = _new_entry(tenant, domain, day, run_id)
        entry.s3_path = day_export.day_uri if day_export else day_folder(tenant, domain.name, day)
        _log_failure(clickhouse, entry, exc, secrets)
        raise
    return PreparedDay(tenant, domain, day, day_export, day_schema, secrets, timer=timer)


@dataclass
class KnownDays:
    """What a run reads once, in bulk, for all its tenant-days instead of once per day: the last
    attempt number and state of each (domain, day), and which days still hold backfilled rows
    and up to when they were ingested (only those need a clear). Measured: 5 + 5 ms per
    tenant-day read one by one.

    A day another process loads after this read is not cleared first; that cannot end in a wrong
    'completed': rows_loaded is counted with FINAL after the INSERT, and rows the export no longer
    holds make it differ from the footers, so the day fails and its rows are cleared."""

    attempts: dict[tuple[str, dt.date], int]
    with_rows: set[tuple[str, dt.date]]
    # The newest ingested_at of each day's backfilled rows, and the days whose last state is
    # 'completed': a reload of one of those keeps its rows until the new ones are in.
    loaded_until: dict[tuple[str, dt.date], dt.datetime] = field(default_factory=dict)
    completed: set[tuple[str, dt.date]] = field(default_factory=set)

    def attempt(self, domain: Domain, day: dt.date) -> int:
        return self.attempts.get((domain.name, day), 0) + 1

    def holds_rows(self, domain: Domain, day: dt.date) -> bool:
        return (domain.name, day) in self.with_rows

    def reload_until(self, domain: Domain, day: dt.date) -> dt.datetime | None:
        """For a completed day that holds rows (a reload): the newest ingested_at of its rows;
        None for any other day."""
        key = (domain.name, day)
        return self.loaded_until.get(key) if key in self.completed else None


def known_days(
    client: Client, tenant: Tenant, domains: list[Domain], days: list[dt.date]
) -> KnownDays:
    text, parameters = previous_attempts_statement(tenant, domains, days)
    result = client.query(text, parameters=parameters)
    attempts, completed = {}, set()
    for domain, day, attempt, status in result.result_rows:
        attempts[(domain, day)] = int(attempt)
        if status == "completed":
            completed.add((domain, day))
    loaded_until = {}
    for domain in domains:
        text, parameters = backfill_days_statement(tenant, domain, days)
        found = client.query(text, parameters=parameters)
        loaded_until |= {(domain.name, day): until for day, until in found.result_rows}
    return KnownDays(attempts, set(loaded_until), loaded_until, completed)


def insert_day(
    clickhouse: ClickHouseResource,
    prepared: PreparedDay,
    run_id: str,
    canceled: threading.Event | None = None,
    after_load: AfterLoad | None = None,
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
    entry = _load_entry(prepared, run_id)
    cluster = clickhouse.resolved_cluster()
    statement = insert_statement(
        tenant, domain, day, prepared.day_export, prepared.day_schema, _credentials(tenant), cluster
    )
    with _day_session(clickhouse, prepared) as client:
        known = _log_running(client, prepared, entry, known)
        reload_until = known.reload_until(domain, day)
        try:
            insert_seconds = _write_day(
                client,
                prepared,
                entry,
                statement,
                cluster,
                canceled=canceled,
                clear_first=known.holds_rows(domain, day),
                reload_until=reload_until,
            )
        except BaseException as exc:
            # Even a KeyboardInterrupt: the attempt must not stay 'running' with partial rows.
            failure = _as_cancel(exc, canceled)
            _record_failure(client, clickhouse, entry, failure, prepared, since=reload_until)
            if failure is exc:
                raise
            raise failure from exc
        _log_completed(client, entry, prepared.timer, after_load)
    return _day_load(prepared, entry, insert_seconds)


def _load_entry(prepared: PreparedDay, run_id: str) -> backfill_log.LogEntry:
    """The day's backfill_log row as the validation left it: files, bytes, footer rows."""
    day_export = prepared.day_export
    entry = _new_entry(prepared.tenant, prepared.domain, prepared.day, run_id)
    entry.s3_path, entry.files = day_export.day_uri, len(day_export.files)
    entry.bytes, entry.source_rows = day_export.bytes, day_export.num_rows
    entry.query_id = prepared.query_id
    entry.source_files = day_export.fingerprint()
    return entry


@contextlib.contextmanager
def _day_session(clickhouse: ClickHouseResource, prepared: PreparedDay) -> Iterator[Client]:
    """The day's exclusion, room for its bytes among the INSERTs in flight, then a session."""
    tenant, domain, day, timer = prepared.tenant, prepared.domain, prepared.day, prepared.timer
    with contextlib.ExitStack() as engine:
        engine.enter_context(clickhouse.day_exclusion(tenant.key, domain.name, day))
        # Only the wait is timed: the room is held until the session ends.
        with timer.phase("insert_room_wait"):
            label = f"{domain.raw_table} {tenant.key} {day}"
            engine.enter_context(clickhouse.insert_room(prepared.day_export.bytes, label))
        yield engine.enter_context(clickhouse.session(timer))


def _log_running(
    client: Client,
    prepared: PreparedDay,
    entry: backfill_log.LogEntry,
    known: KnownDays | None,
) -> KnownDays:
    """Logs 'running' under the day's next attempt number; returns the days' bulk read used."""
    domain, day, timer = prepared.domain, prepared.day, prepared.timer
    with timer.phase("ensure_schema"):
        ensure_schema(client)
    with timer.phase("previous_attempt"):
        if known is None:
            known = known_days(client, prepared.tenant, [domain], [day])
        entry.attempt = known.attempt(domain, day)
    with timer.phase("log_running"):
        backfill_log.write(client, entry, "running")
    return known


def _write_day(
    client: Client,
    prepared: PreparedDay,
    entry: backfill_log.LogEntry,
    statement: Statement,
    cluster: str | None,
    *,
    canceled: threading.Event | None,
    clear_first: bool,
    reload_until: dt.datetime | None = None,
) -> float:
    """Clear, INSERT, count and explain the count into `entry`; returns the INSERT's seconds.

    A reload of a completed day (`reload_until`: its rows' newest ingested_at) clears after the
    INSERT instead, only the rows ingested up to then: until the new rows are all in, the day
    keeps the ones it had, and a failure removes only its own."""
    tenant, domain, day, timer = prepared.tenant, prepared.domain, prepared.day, prepared.timer
    if clear_first and reload_until is None:
        with timer.phase("clear_day"):
            clear_day(client, domain, tenant, day)
    insert_seconds = _timed_insert(client, prepared, statement, cluster, canceled)
    if reload_until is not None:
        with timer.phase("clear_day"):
            clear_day(client, domain, tenant, day, until=reload_until)
    with timer.phase("count_day"):
        entry.rows_loaded = count_day(client, domain, tenant, day)
    with timer.phase("explain_difference"):
        entry.duplicate_rows = _explain_difference(client, prepared, entry, cluster)
    return insert_seconds


def _timed_insert(
    client: Client,
    prepared: PreparedDay,
    statement: Statement,
    cluster: str | None,
    canceled: threading.Event | None,
) -> float:
    """The INSERT's seconds; a cancel seen once it returns still fails the day."""
    started = time.monotonic()
    # A day with no events in a complete export has no file to read: it is cleared,
    # counted (0) and logged completed like any other day.
    if prepared.day_export.files:
        with prepared.timer.phase("insert"):
            _insert(client, prepared, statement, cluster, canceled)
    seconds = time.monotonic() - started
    if canceled is not None and canceled.is_set():
        raise LoadCanceled("the Dagster run was canceled during the INSERT")
    return seconds


def _as_cancel(exc: BaseException, canceled: threading.Event | None) -> BaseException:
    """A failure during a cancel is the cancel's doing: logged as LoadCanceled, naming it."""
    if canceled is not None and canceled.is_set() and not isinstance(exc, LoadCanceled):
        return LoadCanceled(f"the Dagster run was canceled during the INSERT ({exc})")
    return exc


def _log_completed(
    client: Client,
    entry: backfill_log.LogEntry,
    timer: PhaseTimer,
    after_load: AfterLoad | None,
) -> None:
    with timer.phase("log_completed"):
        backfill_log.write(client, entry, "completed")
    if after_load is not None:
        after_load(client, entry)


def _day_load(
    prepared: PreparedDay, entry: backfill_log.LogEntry, insert_seconds: float
) -> DayLoad:
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
        phases=prepared.timer,
    )


def _insert(
    client: Client,
    prepared: PreparedDay,
    statement: Statement,
    cluster: str | None,
    canceled: threading.Event | None,
) -> None:
    """The INSERT; when it fails on the day's data, the error names the files, columns and rows.

    The guards' messages are constants (rule and column); only on this failure path are the
    files read once more, grouped by file, to say where. A failure the rows do not explain (an
    unreachable source, a full disk, a cancel) is re-raised as it came.
    """
    text, parameters = statement
    try:
        run_command(client, text, parameters, settings={"query_id": prepared.query_id})
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


def kill_insert(clickhouse: ClickHouseResource, query_id: str) -> None:
    """Stops an in-flight INSERT on a server; the embedded engine runs it in this process."""
    if clickhouse.is_embedded():
        return
    text, parameters = kill_query_statement(query_id)
    with clickhouse.session() as client:
        run_command(client, text, parameters)


def failure_message(clickhouse: ClickHouseResource, exc: BaseException, secrets: tuple) -> str:
    return clickhouse.redact(f"{type(exc).__name__}: {exc}", tuple(secrets))[:4000]


def _record_failure(
    client: Client,
    clickhouse: ClickHouseResource,
    entry: backfill_log.LogEntry,
    exc: BaseException,
    prepared: PreparedDay,
    since: dt.datetime | None,
) -> None:
    """Leaves no half-written day behind: partial rows are cleared before 'failed' is logged;
    a reload (`since`: the previous rows' newest ingested_at) clears only its own rows, so the
    day keeps what it held before."""
    entry.error_message = failure_message(clickhouse, exc, prepared.secrets)
    try:
        clear_day(client, prepared.domain, prepared.tenant, entry.partition_date, since=since)
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
