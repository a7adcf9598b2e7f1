"""A run's effective INSERT concurrency (1..cap, adapting to the service) and the operator's pause.

Invariants: the limit never leaves 1..cap (the cap is the pool's live limit, which
orchestration/insert_limit.py moves when an operator changes it);
`capacity()` is what LoadScheduler reads (through InsertLimit) before each dispatch, under its
lock, so it does no I/O
(0 while paused). The service pushing back lowers the limit at once: to 1 when it says so
itself (delayed or rejected INSERTs, a partition at parts_to_delay_insert, the operator's health
query above its threshold), by half for a transient failure of a day or a partition at half its
parts_to_delay_insert. It rises by one per ATLAS_BACKPRESSURE_RECOVERY_SECONDS without pushback.
Every change is logged with its reason and published as the run's tag `atlas/insert_concurrency`
(the run's page in the UI, `atlas-dagster status`).

The pause is a flag in the Dagster instance's key-value store (`atlas-dagster pause`), for all
runs, one run or one backfill (covering the runs its daemon submits later): every process of the
instance sees it (SQLite or PostgreSQL) within PAUSE_READ_SECONDS, and reading it needs no engine,
whereas a ClickHouse row would need the embedded engine's lock that the paused run itself holds.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client
from dagster import DagsterInstance

from atlas_dagster import sql
from atlas_dagster.core.waits import WaitLog
from atlas_dagster.dagster_internals import kv_get, kv_set
from atlas_dagster.settings import (
    HEALTH_PROBE_SECONDS,
    HEALTH_THRESHOLD,
    PARTS_PRESSURE_RATIO,
    RECOVERY_SECONDS,
)

PAUSE_PREFIX = "atlas/pause/"
PAUSE_ALL = "all"
PAUSE_READ_SECONDS = 1.0
# A paused run says it is still paused this often, so a forgotten pause shows in the run log.
PAUSE_REMINDER_SECONDS = 300.0


@dataclass(frozen=True)
class Change:
    at: float  # time.time()
    old: int
    new: int
    reason: str


@dataclass(frozen=True)
class Health:
    """One probe of the service (sql/queries/health_probe.sql and ATLAS_HEALTH_QUERY)."""

    max_parts: int
    parts_to_delay_insert: int
    pushed_back_inserts: int
    health_value: float | None = None


def probe(client: Client, tables: list[str], operator_query: str = "") -> Health:
    """Reads the service's pushback in the caller's session (a few milliseconds), and the
    operator's health query (ATLAS_HEALTH_QUERY) when there is one."""
    result = client.query(sql.query("health_probe"), parameters={"tables": tables})
    max_parts, delay_at, pushed_back = result.result_rows[0]
    value = None
    if operator_query:
        value = float(client.command(operator_query))
    return Health(int(max_parts or 0), int(delay_at or 0), int(pushed_back or 0), value)


class Backpressure:
    """The limit and its history for one run; thread-safe (workers and the run's thread).

    `recovery_seconds`, `probe_seconds` and `threshold` are the run's
    ATLAS_BACKPRESSURE_RECOVERY_SECONDS, ATLAS_HEALTH_PROBE_SECONDS and ATLAS_HEALTH_THRESHOLD
    (the resource atlas_settings)."""

    def __init__(
        self,
        cap: int,
        log: WaitLog,
        publish: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        recovery_seconds: float = RECOVERY_SECONDS.default,
        probe_seconds: float = HEALTH_PROBE_SECONDS.default,
        threshold: float = HEALTH_THRESHOLD.default,
    ) -> None:
        self.cap = max(1, cap)
        self.log = log
        self.publish = publish
        self.clock = clock
        self.recovery_seconds = recovery_seconds
        self.probe_seconds = probe_seconds
        self.threshold = threshold
        self.paused = False
        self.changes: list[Change] = []
        self._limit = self.cap
        self._lock = threading.Lock()
        self._calm_since = clock()  # the last pushback or step up
        self._failures_in_row = 0
        self._pushed_back_seen: int | None = None
        self._probe_due = 0.0
        self._probing = False

    @property
    def limit(self) -> int:
        return self._limit

    def capacity(self) -> int:
        """INSERTs the run may start now (0 while paused); no I/O."""
        return 0 if self.paused else self._limit

    def _set(self, new: int, reason: str) -> None:
        """Called with the lock held; logs and publishes a change outside it."""
        new = max(1, min(self.cap, new))
        old, self._limit = self._limit, new
        if new == old:
            return
        self.changes.append(Change(time.time(), old, new, reason))
        text = f"INSERT concurrency {old} -> {new} of {self.cap}: {reason}"
        (self.log.warning if new < old else self.log.info)(text)
        if self.publish is not None:
            self.publish(f"{new} of {self.cap}: {reason}"[:200])

    def set_cap(self, cap: int, reason: str) -> None:
        """The operator changed the pool's limit: a run at full width follows it at once, one
        under pushback keeps its limit (below the new cap) and recovers towards it."""
        with self._lock:
            old_cap, self.cap = self.cap, max(1, cap)
            if self._limit >= old_cap or self._limit > self.cap:
                self._set(self.cap, reason)

    def pushback(self, reason: str, severe: bool) -> None:
        """The service pushed back: to 1 if `severe`, else half (at least 1)."""
        with self._lock:
            self._calm_since = self.clock()
            self._set(1 if severe else self._limit // 2, reason)

    def transient_failure(self, cause: str) -> None:
        with self._lock:
            self._failures_in_row += 1
            count = self._failures_in_row
        self.pushback(f"{count} transient failure(s) in a row, the last: {cause}", severe=False)

    def success(self) -> None:
        with self._lock:
            self._failures_in_row = 0
        self.recover()

    def recover(self) -> None:
        """One step up once the service has been calm for the recovery time."""
        with self._lock:
            calm = self.clock() - self._calm_since
            if self._limit >= self.cap or calm < self.recovery_seconds:
                return
            self._calm_since = self.clock()
            self._set(self._limit + 1, f"no pushback for {calm:.0f}s")

    def probe_due(self) -> bool:
        """At most one probe per `probe_seconds`, claimed by the first caller."""
        with self._lock:
            now = self.clock()
            if self._probing or now < self._probe_due:
                return False
            self._probing, self._probe_due = True, now + self.probe_seconds
            return True

    def observe(self, health: Health) -> None:
        """Turns a probe into pushback (or nothing); ends the probe claimed by probe_due."""
        with self._lock:
            self._probing = False
            seen, self._pushed_back_seen = self._pushed_back_seen, health.pushed_back_inserts
        reasons = []
        if seen is not None and health.pushed_back_inserts > seen:
            reasons.append(
                f"ClickHouse delayed or rejected {health.pushed_back_inserts - seen} INSERT(s)"
            )
        delay_at = health.parts_to_delay_insert
        ratio = health.max_parts / delay_at if delay_at else 0.0
        if ratio >= 1:
            reasons.append(
                f"a raw partition holds {health.max_parts} parts, parts_to_delay_insert is "
                f"{health.parts_to_delay_insert}"
            )
        threshold = self.threshold
        if health.health_value is not None and health.health_value > threshold:
            reasons.append(f"ATLAS_HEALTH_QUERY returned {health.health_value:g} > {threshold:g}")
        if reasons:
            self.pushback("; ".join(reasons), severe=True)
        elif ratio >= PARTS_PRESSURE_RATIO:
            self.pushback(
                f"a raw partition holds {health.max_parts} parts, "
                f"{ratio:.0%} of parts_to_delay_insert",
                severe=False,
            )
        else:
            self.recover()

    def probe_failed(self, why: str) -> None:
        """Ends the probe claimed by probe_due; `why` is already redacted."""
        with self._lock:
            self._probing = False
        self.log.warning(f"health probe failed ({why[:500]}); INSERT limit kept")

    def set_paused(self, paused: bool, why: str) -> None:
        if paused == self.paused:
            return
        self.paused = paused
        if paused:
            self.log.warning(
                f"paused ({why}): no new INSERT starts; those in flight finish. "
                "`atlas-dagster resume` goes on"
            )
        else:
            self.log.info(f"resumed ({why}): up to {self._limit} INSERT(s) at once")


def pause_keys(run_id: str, backfill_id: str | None) -> list[str]:
    """The flags that pause a run: all runs, the run itself, its backfill."""
    keys = [PAUSE_PREFIX + PAUSE_ALL, f"{PAUSE_PREFIX}run/{run_id}"]
    if backfill_id:
        keys.append(f"{PAUSE_PREFIX}backfill/{backfill_id}")
    return keys


def pause_key(run_id: str | None = None, backfill_id: str | None = None) -> str:
    if run_id:
        return f"{PAUSE_PREFIX}run/{run_id}"
    if backfill_id:
        return f"{PAUSE_PREFIX}backfill/{backfill_id}"
    return PAUSE_PREFIX + PAUSE_ALL


def set_pause(instance: DagsterInstance, key: str, paused: bool, who: str) -> None:
    """Writes (or clears) one pause flag; the value says who paused and when."""
    value = ""
    if paused:
        since = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        value = json.dumps({"by": who, "since": since})
    kv_set(instance, {key: value})


def pauses(instance: DagsterInstance, keys: list[str]) -> dict[str, str]:
    """The flags among `keys` that are set, with their value."""
    return {k: v for k, v in kv_get(instance, set(keys)).items() if v}


class PauseWatch:
    """Reads a run's pause flags at most every PAUSE_READ_SECONDS (from the run's thread)."""

    def __init__(self, instance: DagsterInstance, keys: list[str], pressure: Backpressure) -> None:
        self.instance = instance
        self.keys = keys
        self.pressure = pressure
        self._read_at = 0.0
        self._reminded_at = 0.0

    def poll(self) -> bool:
        """Reads the flags when due; returns whether the run is paused."""
        now = time.monotonic()
        if now - self._read_at < PAUSE_READ_SECONDS:
            return self.pressure.paused
        self._read_at = now
        found = pauses(self.instance, self.keys)
        why = ", ".join(f"{k[len(PAUSE_PREFIX) :]} {v}" for k, v in sorted(found.items()))
        was = self.pressure.paused
        self.pressure.set_paused(bool(found), why or "the pause flag was cleared")
        if found and was and now - self._reminded_at >= PAUSE_REMINDER_SECONDS:
            self.pressure.log.warning(f"still paused ({why})")
            self._reminded_at = now
        elif found and not was:
            self._reminded_at = now
        return bool(found)
