"""One raw run: the selected domains × tenant-days, loaded newest first, checked, reported per day.

A run may hold one partition (the CLI, the UI's single materialization) or a range (a backfill,
one run per tenant): every tenant-day still validates, INSERTs, logs and reports on its own, so a
failed day fails its own partition only. Each settled day's checks are read and reported in
batches (checks/batch.py) after its materialization, on its own partition.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator

from clickhouse_connect.driver.client import Client
from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    Failure,
    MetadataValue,
    Output,
)

from atlas_dagster.checks.batch import CheckBatch
from atlas_dagster.checks.export_window import ExportState
from atlas_dagster.checks.raw import CheckedDay, LoadIdentity, window_days
from atlas_dagster.checks.results import CheckOutcome, check_outputs
from atlas_dagster.core.phases import process_cpu_seconds
from atlas_dagster.core.tags import (
    BACKFILL_ID_TAG,
    CONCURRENCY_TAG,
    COVERED_BY_TAG,
    FLEET_LEADER_TAG,
    SELECT_TAG,
    TIME_LEFT_TAG,
)
from atlas_dagster.core.waits import ClaimCanceled
from atlas_dagster.core.workers import current_worker
from atlas_dagster.domains import DOMAINS, Domain
from atlas_dagster.exports.layout import ExportSource
from atlas_dagster.loading import backfill_log
from atlas_dagster.loading.day_load import (
    KnownDays,
    PreparedDay,
    failure_message,
    insert_day,
    kill_insert,
    known_days,
    prepare_day,
)
from atlas_dagster.loading.faults import classify
from atlas_dagster.loading.retry import RetryPolicy, resolve_uncertain
from atlas_dagster.monitoring.pace import Pace, combined, read_paces, time_left
from atlas_dagster.monitoring.progress_metadata import progress_metadata
from atlas_dagster.monitoring.run_log import DayLines
from atlas_dagster.orchestration.backpressure import Backpressure, PauseWatch, pause_keys, probe
from atlas_dagster.orchestration.insert_limit import InsertLimit
from atlas_dagster.orchestration.pools import InsertSlots
from atlas_dagster.orchestration.raw_work import (
    RawResult,
    RawWork,
    domains_by_key,
    load_metadata,
    plan_works,
    tries_text,
)
from atlas_dagster.orchestration.resume import resume
from atlas_dagster.orchestration.scheduler import LoadScheduler, OrderedWork
from atlas_dagster.orchestration.selection import Selection, parse, select_days
from atlas_dagster.partitions import backfill_raw_partitions, day_priority
from atlas_dagster.partitions import partition_key as tenant_day_key
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.settings import LoadSettings
from atlas_dagster.tenants import Tenant

RAW_STEP = "raw_events"
# The tenant's backfill progress (a read of its whole window in backfill_log) rides on a day's
# materialization at most this often, and always on the run's last one: measured 23 ms a day
# when read for every day, a cost that grew with the tenant's history.
PROGRESS_EVERY_SECONDS = 10.0


class RawRun:
    """Executes the loads of one Dagster step and turns each day's outcome into Dagster events."""

    def __init__(
        self,
        context: AssetExecutionContext,
        clickhouse: ClickHouseResource,
        tenants: list[Tenant],
        settings: LoadSettings,
    ) -> None:
        self.context = context
        self.clickhouse = clickhouse
        self.tenants = tenants
        # The run's tunables (the resource atlas_settings), passed down to the retry policy,
        # the pool, the backpressure and the scheduler: none of them reads the environment.
        self.settings = settings
        self.run_id = context.run.run_id
        self.selected_checks = set(context.selected_asset_check_keys)
        self.failed: list[str] = []
        # Filled by worker threads as days are prepared, read on cancel to stop their queries.
        self._query_ids: dict[RawWork, str] = {}
        # Per tenant key: attempts and days with rows, read in bulk once the engine is open.
        self._known: dict[str, KnownDays] = {}
        # Per tenant key: when its progress metadata was last read (monotonic seconds).
        self._progress_read: dict[str, float] = {}
        # The run's own progress, for its time-left tag: days to load, days settled, days
        # loaded and their export rows, and when the tag was last written.
        self._run_days = 0
        self._settled = 0
        self._loaded = (0, 0)
        self._time_left_at: float | None = None
        # Each domain's measured pace, shared by the progress of every tenant of the run: read
        # at most every PROGRESS_EVERY_SECONDS (a fleet run's tenants each report about a day
        # apart). (monotonic seconds read, paces)
        self._paces: tuple[float, dict[str, Pace | None]] | None = None
        # The run's slots of the INSERT pool, set while its loads run.
        self._slots: InsertSlots | None = None
        # The days' "INSERT started" and "rows from" lines, a few days to a line.
        self._lines = DayLines(context.log)
        self._policy = RetryPolicy.from_settings(settings)
        # Set while the loads run: the INSERT limit (the pool's, lowered by the backpressure),
        # the backpressure itself, the operator's pause flags.
        self._limit: InsertLimit | None = None
        self._pressure: Backpressure | None = None
        self._pause: PauseWatch | None = None
        self._raw_tables: list[str] = []
        # Days whose INSERT's connection dropped against a server: resolved before their retry.
        self._uncertain: dict[RawWork, str] = {}
        self._scheduler: LoadScheduler[RawWork, RawResult] | None = None
        # Per tenant key: its export's reader, shared by the run's days (one S3 client, and the
        # domain-wide facts: completeness markers, table formats, read once per run).
        self._sources: dict[str, ExportSource] = {}
        # Settled days waiting for their checks, read and reported a batch at a time.
        self._checks = CheckBatch(context, clickhouse, on_failed=self._checks_failed)

    def events(self) -> Iterator[AssetMaterialization | Output]:
        context = self.context
        covered_by = context.run.tags.get(COVERED_BY_TAG)
        if covered_by:
            context.log.info(
                f"this fleet backfill's days load in run {covered_by}, which orders every "
                "tenant's days newest first: nothing to do here"
            )
            return
        partition_keys = self._partition_keys()
        loading = domains_by_key(set(context.selected_asset_keys))
        checking_only = [
            d
            for d in DOMAINS.values()
            if d not in loading
            and any(k.asset_key == AssetKey(d.raw_table) for k in self.selected_checks)
        ]
        try:
            if loading:
                yield from self._load(loading, partition_keys)
            if checking_only:
                self._verify(checking_only, partition_keys)
        finally:
            self._last_checks()
        yield from check_outputs(context)  # every day's check evaluations are stored by now
        if self.failed:
            shown = ", ".join(self.failed[:20]) + (" …" if len(self.failed) > 20 else "")
            raise Failure(
                description=f"{len(self.failed)} tenant-day(s) failed: {shown}",
                metadata={"failed": MetadataValue.json(self.failed)},
            )

    def _partition_keys(self) -> list[str]:
        """The run's own range, or for a fleet backfill's leader the whole backfill's target."""
        tags = self.context.run.tags
        if FLEET_LEADER_TAG not in tags or BACKFILL_ID_TAG not in tags:
            return list(self.context.partition_keys)
        by_asset = backfill_raw_partitions(self.context.instance, tags[BACKFILL_ID_TAG])
        keys = sorted({k for a in self.context.selected_asset_keys for k in by_asset.get(a, [])})
        self.context.log.info(
            f"fleet backfill: loading all {len(keys)} tenant-day(s) of backfill "
            f"{tags[BACKFILL_ID_TAG]} in this run, newest day first across the tenants"
        )
        return keys

    def _load(
        self, domains: list[Domain], partition_keys: list[str]
    ) -> Iterator[AssetMaterialization]:
        works, refused, skipped = plan_works(self.tenants, domains, partition_keys)
        self._report_refused(refused, skipped)
        # Embedded: one open engine for the run's days, handed over whenever another waits.
        with self.clickhouse.kept_open():
            # A relaunch after a crash: what an earlier attempt completed is not loaded again,
            # and reported if it never was; before the selection, which would drop it unreported.
            works, owed = resume(self.context, self.clickhouse, works)
            yield from owed
            works = self._selected(works)
            if not works:
                return
            self._run_days = len(works)
            scheduler = self._start(works, domains)
            self._read_known(works)
            yield from self._run_loads(scheduler)

    def _selected(self, works: list[RawWork]) -> list[RawWork]:
        """The works SELECT_TAG takes (selection.py), read now: a day completed since the launch
        was planned, by an earlier attempt of this run or by another launch, is not reloaded."""
        selection = parse(self.context.run.tags.get(SELECT_TAG))
        if selection is Selection.ALL:
            return works
        by_tenant: dict[str, list[RawWork]] = {}
        for work in works:
            by_tenant.setdefault(work.tenant.key, []).append(work)
        taken: set[RawWork] = set()
        with self.clickhouse.session() as client:
            ensure_schema(client)
            for tenant_works in by_tenant.values():
                tenant = tenant_works[0].tenant
                domains = list({w.domain.name: w.domain for w in tenant_works}.values())
                days = sorted({w.tenant_day.partition_date for w in tenant_works})
                source = self._sources.setdefault(tenant.key, ExportSource(tenant))
                selected = select_days(client, tenant, domains, days, selection, source)
                taken |= {
                    w
                    for w in tenant_works
                    if (w.domain.name, w.tenant_day.partition_date) in selected
                }
        kept = [w for w in works if w in taken]  # in the run's order: newest first
        self.context.log.info(
            f"day selection '{selection}': loading {len(kept)} of the range's {len(works)} "
            f"tenant-day(s); the other {len(works) - len(kept)} are left as they are"
        )
        return kept

    def _report_refused(self, refused: list[tuple[RawWork | None, str, str]], skipped: int) -> None:
        """Days the run will not load: skipped ones counted, refused ones failed with checks."""
        if skipped:
            self.context.log.info(
                f"skipped {skipped} tenant-day(s) of this range outside their tenant's or "
                "domain's window, or of domains the tenant does not list"
            )
        for work, partition_key, reason in refused:
            self.context.log.error(f"refused {partition_key}: {reason}")
            label = work.label if work else partition_key
            self.failed.append(label)
            if work is not None:
                self._checks.add(_refused(work, reason))

    def _start(
        self, works: list[RawWork], domains: list[Domain]
    ) -> LoadScheduler[RawWork, RawResult]:
        """The run's INSERT limit (the pool seeded, the backpressure and pause watch on), its
        slots and scheduler."""
        limit = self._start_limit(domains)
        scheduler: LoadScheduler[RawWork, RawResult] = LoadScheduler(
            [
                OrderedWork(
                    w, w.tenant.key, (w.tenant.key, w.domain.name), w.tenant_day.partition_date, i
                )
                for i, w in enumerate(works)
            ],
            self._execute,
            parallelism=InsertLimit.width,
            ramp_days=self.settings.ramp_up_days,
            capacity=limit.capacity,
            retry=self._retry,
        )
        self._scheduler = scheduler
        self.context.log.info(
            f"loading {len(works)} tenant-day(s) newest first: up to {limit.capacity()} INSERTs "
            f"at once (the pool's limit, {limit.live()}, followed live) after each tenant's first "
            f"{self.settings.ramp_up_days} day(s) pass one at a time"
        )
        self._slots = InsertSlots(
            self.context.instance,
            self.run_id,
            RAW_STEP,
            scheduler.has_pending,
            self.context.log,
            wait_seconds=self.settings.slot_wait_seconds,
        )
        return scheduler

    def _run_loads(
        self, scheduler: LoadScheduler[RawWork, RawResult]
    ) -> Iterator[AssetMaterialization]:
        """Each day's outcome as the scheduler settles it, reported one day behind, so that the
        run's last materialization can carry the tenant's progress as the run leaves it."""
        assert self._slots is not None
        held: RawResult | None = None
        try:
            for outcome in scheduler.run(
                on_started=lambda w: self._lines.started(f"{w.label} (worker {current_worker()})"),
                on_cancel=self._kill_in_flight,
                on_idle=self._idle,
                on_retry=self._log_retry,
            ):
                self._after_outcome(outcome.result)
                if held is not None:
                    yield from self._report(held)
                    self._checks.flush_if_due()
                held = outcome.result
        finally:
            self._slots.release()
            self._lines.flush()
            self._publish_time_left(None, force=True)
        if held is not None:
            if held.load is not None and not held.progress:
                self._add_progress(held, force=True)
            yield from self._report(held)
        self._lines.flush()

    def _start_limit(self, domains: list[Domain]) -> InsertLimit:
        instance, run_id = self.context.instance, self.run_id

        def publish(text: str) -> None:
            instance.add_run_tags(run_id, {CONCURRENCY_TAG: text})

        def pressure(width: int) -> Backpressure:
            return Backpressure(
                width,
                self.context.log,
                publish,
                recovery_seconds=self.settings.recovery_seconds,
                probe_seconds=self.settings.health_probe_seconds,
                threshold=self.settings.health_threshold,
            )

        limit = InsertLimit.start(
            instance, self.settings.parallel_inserts, pressure, self.context.log
        )
        self._limit, self._pressure = limit, limit.pressure
        publish(f"{limit.pressure.cap} of {limit.pressure.cap}: no pushback seen")
        backfill_id = self.context.run.tags.get(BACKFILL_ID_TAG)
        self._pause = PauseWatch(instance, pause_keys(run_id, backfill_id), self._pressure)
        self._raw_tables = [d.raw_table for d in domains]
        self._pause.poll()
        return limit

    def _idle(self) -> None:
        """Nothing reported for a while: the day lines, the pause flags and the pool's limit, a
        step up if calm."""
        self._lines.tick()
        assert self._pause is not None and self._pressure is not None and self._slots is not None
        assert self._limit is not None
        self._limit.refresh()
        waiting = self._scheduler is not None and self._scheduler.next_retry_in() is not None
        if self._pause.poll() or waiting:
            # A paused run, or one idle while days wait to retry, keeps no idle slot from other
            # runs (claiming one again costs ~0.1 s, nothing beside a retry's wait).
            self._slots.release()
        self._pressure.recover()
        self._checks.flush_if_due()

    def _after_outcome(self, result: RawResult) -> None:
        assert self._pause is not None and self._pressure is not None and self._limit is not None
        self._settled += 1
        if result.load is not None:
            days, rows = self._loaded
            self._loaded = (days + 1, rows + result.load.source_rows)
            self._pressure.success()
        self._pause.poll()
        self._limit.refresh()

    def _retry(self, work: RawWork, result: RawResult, attempt: int) -> float | None:
        """LoadScheduler's retry hook (a worker thread): seconds until the day's next try, or
        None when its failure is final. A retried day is marked as holding rows, so that its
        next try clears it before the INSERT, and its attempt number moves on."""
        result.attempts = attempt
        if result.load is not None or result.exception is None:
            return None  # loaded with a failed check, or refused before any try
        assert self._pressure is not None
        try:
            fault = result.fault = classify(result.exception)
            if fault.transient:
                self._pressure.transient_failure(f"{work.label}: {fault.cause}")
            delay = self._policy.next_try(fault, attempt)
            if delay is None:
                return None
            known = self._known.get(work.tenant.key)
            if known is not None:
                key = (work.domain.name, work.tenant_day.partition_date)
                known.attempts[key] = known.attempts.get(key, 0) + 1
                known.with_rows.add(key)
            query_id = self._query_ids.get(work)
            if fault.uncertain and result.insert_started_at is not None and query_id:
                self._uncertain[work] = query_id
            return delay
        except Exception as exc:  # a bug here must not end the run: the day fails as it is
            self.context.log.warning(f"{work.label}: no retry ({type(exc).__name__}: {exc})")
            return None

    def _log_retry(self, work: RawWork, result: RawResult, attempt: int, delay: float) -> None:
        at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay)
        cause = result.fault.cause if result.fault is not None else "?"
        self._lines.flush()
        self.context.log.warning(
            f"{work.label}: try {attempt} of {self._policy.attempts} failed, transient "
            f"({cause}); retry {attempt + 1} in {delay:.1f}s at {at:%H:%M:%S} UTC, holding no "
            f"INSERT slot meanwhile. Error: {result.error[:300]}"
        )

    def _read_known(self, works: list[RawWork]) -> None:
        by_tenant: dict[str, list[RawWork]] = {}
        for work in works:
            by_tenant.setdefault(work.tenant.key, []).append(work)
        with self.clickhouse.session() as client:
            ensure_schema(client)
            for key, tenant_works in by_tenant.items():
                domains = list({w.domain.name: w.domain for w in tenant_works}.values())
                days = sorted({w.tenant_day.partition_date for w in tenant_works})
                self._known[key] = known_days(client, tenant_works[0].tenant, domains, days)

    def _progress_due(self, tenant: Tenant) -> bool:
        """At most every PROGRESS_EVERY_SECONDS per tenant (claimed by the first caller)."""
        now = time.monotonic()
        last = self._progress_read.get(tenant.key)
        if last is not None and now - last < PROGRESS_EVERY_SECONDS:
            return False
        self._progress_read[tenant.key] = now
        return True

    def _add_progress(self, result: RawResult, force: bool = False) -> None:
        tenant = result.work.tenant
        if force or self._progress_due(tenant):
            with self.clickhouse.session() as client:
                result.progress = progress_metadata(
                    client, tenant, limit=self._live_limit(), paces=self._read_paces(client)
                )

    def _publish_time_left(self, client: Client | None, force: bool = False) -> None:
        """The run's days left and their time (pace.time_left, as every progress figure) as the
        run's tag TIME_LEFT_TAG, at most every PROGRESS_EVERY_SECONDS and when its loads end:
        what `backfill --wait` shows while it follows the backfill."""
        now = time.monotonic()
        last = self._time_left_at
        if not force and last is not None and now - last < PROGRESS_EVERY_SECONDS:
            return
        self._time_left_at = now
        left = self._run_days - self._settled
        days, rows = self._loaded
        paces = self._read_paces(client).values() if left and client is not None else ()
        pace = combined([p for p in paces if p is not None])
        seconds = time_left(pace, left, days, rows, self._live_limit())
        when = "unknown yet" if seconds is None else f"about {seconds / 60:.1f} min"
        text = f"{left} of {self._run_days} tenant-day(s) left, {when} at the measured pace"
        self.context.instance.add_run_tags(self.run_id, {TIME_LEFT_TAG: text})

    def _read_paces(self, client: Client) -> dict[str, Pace | None]:
        """The run's domains' paces, read again when PROGRESS_EVERY_SECONDS old (any thread: a
        race reads them twice, nothing worse)."""
        now, seen = time.monotonic(), self._paces
        if seen is None or now - seen[0] >= PROGRESS_EVERY_SECONDS:
            seen = self._paces = (now, read_paces(client, [d.name for d in DOMAINS.values()]))
        return seen[1]

    def _live_limit(self) -> int:
        """The pool's limit as the run last read it: the most loads a time left counts at once."""
        return self._limit.live() if self._limit is not None else self.settings.parallel_inserts

    def _execute(
        self, work: RawWork, canceled: threading.Event, mark_started: Callable[[], None]
    ) -> tuple[RawResult, bool]:
        """LoadScheduler's work (a worker thread): the day validated, then loaded in a slot of
        the pool; (its result, whether it loaded). What its checks will read of the export (the
        validation's footer rows and verdict) goes with the result: the checks themselves read
        the log and the raw table once the day has settled, in a batch with others."""
        result = RawResult(work)
        prepared = self._prepare(work, canceled, result)
        if prepared is None:
            return result, False
        validated = ExportState(
            files=len(prepared.day_export.files), rows=prepared.day_export.num_rows, error=None
        )
        self._query_ids[work] = prepared.query_id
        try:
            self._insert_in_slot(work, prepared, canceled, mark_started, result)
        except ClaimCanceled as exc:  # never started: nothing to check
            result.exception = exc
            result.error = str(exc)
            return result, False
        except Exception as exc:
            result.exception = exc
            result.error = failure_message(self.clickhouse, exc, prepared.secrets)
            result.checked = _checked(work, validated)
            return result, False
        assert result.load is not None
        result.checked = _checked(work, validated, LoadIdentity(self.run_id, result.load.attempt))
        return result, True

    def _prepare(
        self, work: RawWork, canceled: threading.Event, result: RawResult
    ) -> PreparedDay | None:
        """A previous try's uncertain INSERT resolved, then the day validated; None when it is
        refused (`result` then holds the error and the checks it fails)."""
        day = work.tenant_day.partition_date
        try:
            uncertain = self._uncertain.get(work)
            if uncertain is not None:  # before any new try of the day (loading/retry.py)
                self.context.log.info(
                    f"{work.label}: {resolve_uncertain(self.clickhouse, uncertain, canceled)}"
                )
                del self._uncertain[work]
            source = self._sources.setdefault(work.tenant.key, ExportSource(work.tenant))
            return prepare_day(self.clickhouse, work.tenant, work.domain, day, self.run_id, source)
        except Exception as exc:
            result.exception = exc
            result.error = failure_message(self.clickhouse, exc, ())
            result.checked = _checked(work, ExportState(files=0, rows=None, error=result.error))
            return None

    def _insert_in_slot(
        self,
        work: RawWork,
        prepared: PreparedDay,
        canceled: threading.Event,
        mark_started: Callable[[], None],
        result: RawResult,
    ) -> None:
        """Waits for a slot of the pool (timed as the phase slot_wait), then loads the day; the
        health probe and the progress read run in the load's own engine session once
        'completed' is logged."""
        day = work.tenant_day.partition_date

        def after_load(client: Client, entry: backfill_log.LogEntry) -> None:
            # In the load's own engine session: in embedded mode a session costs ~0.3 s.
            self._probe(client, prepared.timer)
            self._publish_time_left(client)
            if self._progress_due(work.tenant):
                with prepared.timer.phase("progress_metadata"):
                    result.progress = progress_metadata(
                        client,
                        work.tenant,
                        limit=self._live_limit(),
                        paces=self._read_paces(client),
                    )

        slot_key = f"{RAW_STEP}[{work.domain.name}|{work.partition_key}]"
        assert self._slots is not None
        wait_started = (time.monotonic(), process_cpu_seconds())
        with self._slots.slot(slot_key, day_priority(day), canceled):
            prepared.timer.add(
                "slot_wait",
                time.monotonic() - wait_started[0],
                process_cpu_seconds() - wait_started[1],
            )
            mark_started()
            result.insert_started_at = time.time()
            try:
                result.load = insert_day(
                    self.clickhouse,
                    prepared,
                    self.run_id,
                    canceled=canceled,
                    after_load=after_load,
                    known=self._known.get(work.tenant.key),
                )
            finally:
                result.insert_finished_at = time.time()

    def _probe(self, client: Client, timer) -> None:
        """The service's health, read in a load's session at most every health_probe_seconds
        (a few ms): it may lower the run's INSERT limit."""
        pressure = self._pressure
        if pressure is None or not pressure.probe_due():
            return
        try:
            with timer.phase("health_probe"):
                pressure.observe(probe(client, self._raw_tables, self.settings.health_query))
        except Exception as exc:  # the operator's query may be wrong: the load goes on
            pressure.probe_failed(failure_message(self.clickhouse, exc, ()))

    def _kill_in_flight(self, works: list[RawWork]) -> None:
        self.context.log.warning(
            f"run canceled: stopping {len(works)} load(s) in flight; queued days will not start"
        )
        for work in works:
            query_id = self._query_ids.get(work)
            if query_id is None:
                continue
            try:
                kill_insert(self.clickhouse, query_id)
            except Exception as exc:  # the load's own failure path still logs 'failed'
                self.context.log.warning(f"KILL QUERY {query_id} failed: {exc}")

    def _report(self, result: RawResult) -> Iterator[AssetMaterialization]:
        """The day's outcome; its checks wait for the next batch (after its materialization,
        which they target)."""
        result.settled_at = time.time()
        work = result.work
        if result.load is None:
            if result.checked is not None:
                self._checks.add(result.checked)
            self.failed.append(work.label)
            self._lines.flush()  # what started and finished before it, then the failure
            self.context.log.error(f"{work.label} failed{tries_text(result)}: {result.error}")
            return
        # Every loaded day in the words an operator searches the run log for (the
        # materialization's metadata is not shown inline there), a few days to an event.
        load = result.load
        self._lines.loaded(
            f"{work.label}: {load.rows_loaded} rows from {load.files} files, INSERT "
            f"{load.insert_seconds:.2f}s"
        )
        yield AssetMaterialization(
            asset_key=work.asset_key,
            partition=work.partition_key,
            metadata=load_metadata(result),
        )
        if result.checked is not None:  # stored by now: its checks can target it
            self._checks.add(result.checked)

    def _checks_failed(self, checked: CheckedDay, outcomes: list[CheckOutcome]) -> None:
        """A day this run loaded whose checks failed fails the run too, naming them (a failed
        load is named already; verify's check-only runs report and go on)."""
        if checked.loaded_by is None:
            return
        names = ", ".join(o.check_name for o in outcomes if not o.passed)
        label = f"{checked.domain.raw_table} {tenant_day_key(checked.day, checked.tenant.key)}"
        self.failed.append(f"{label} (checks failed after its load: {names})")
        self.context.log.error(
            f"{label}: checks failed after its load: "
            + "; ".join(f"{o.check_name}: {o.description}" for o in outcomes if not o.passed)
        )

    def _last_checks(self) -> None:
        """The days still waiting for their checks, then what the run's checks cost. A run that
        ends on an error still checks the days it settled; a failure here is logged, not
        raised over the run's own outcome."""
        try:
            self._checks.flush()
        except Exception as exc:
            message = failure_message(self.clickhouse, exc, ())
            self.context.log.error(f"the last batch of checks could not be read: {message}")
            self.failed.append(f"checks: {message}")
        if self._checks.stats.days:
            self.context.log.info(self._checks.stats.describe())

    def _verify(self, domains: list[Domain], partition_keys: list[str]) -> None:
        verify_days(self.clickhouse, self.tenants, domains, partition_keys, self._checks)


def verify_days(
    clickhouse: ClickHouseResource,
    tenants: list[Tenant],
    domains: list[Domain],
    partition_keys: list[str],
    checks: CheckBatch,
) -> None:
    """The raw checks of days without loading them (a check-only run, the verify job): the
    exports re-read in bulk per tenant and domain, then the log rows and raw counts a batch at
    a time. Days outside their tenant's scope fail their checks saying so."""
    works, refused, _ = plan_works(tenants, domains, partition_keys)
    for work, _, reason in refused:
        if work is not None:
            checks.add(_refused(work, reason))
    lanes: dict[tuple[str, str], list[RawWork]] = {}
    for work in works:
        lanes.setdefault((work.tenant.key, work.domain.name), []).append(work)
    with clickhouse.kept_open():
        for lane in lanes.values():
            first = lane[0]
            days = [w.tenant_day.partition_date for w in lane]
            with clickhouse.session() as client:
                for checked in window_days(client, clickhouse, first.tenant, first.domain, days):
                    checks.add(checked)
            checks.flush_if_due()
        checks.flush()


def _checked(
    work: RawWork, export: ExportState, loaded_by: LoadIdentity | None = None
) -> CheckedDay:
    day = work.tenant_day.partition_date
    return CheckedDay(work.tenant, work.domain, day, export, loaded_by)


def _day_key(work: RawWork) -> tuple[str, dt.date]:
    return work.domain.name, work.tenant_day.partition_date


def _refused(work: RawWork, reason: str) -> CheckedDay:
    """A day the run refuses (outside the tenant's scope): its checks still read the log and
    the raw table, and say why it was refused."""
    refused = ExportState(files=0, rows=None, error=f"outside the tenant's scope: {reason}")
    return CheckedDay(
        work.tenant, work.domain, work.tenant_day.partition_date, refused, refused=reason
    )
