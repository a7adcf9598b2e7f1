"""Orders a run's loads: newest day first in every lane, a one-at-a-time ramp-up, then parallel.

A lane is one tenant and domain. Within a lane a day is dispatched only once the newer day before
it has started its INSERT, so no day ever starts before a newer day of the same run. Each tenant
loads its first `ramp_days` (newest) days one INSERT at a time; its parallelism rises to the
steady state only when those days are completed (their raw count matched their footers: the
load's own reconciliation), and stays at 1 if any of them failed. The Dagster pool caps INSERTs
across runs; this caps them within the run.

Two optional hooks (orchestration/backpressure.py, loading/retry.py): `capacity()` lowers the
run's INSERTs at once below `parallelism` while the service pushes back (0 pauses dispatching),
and `retry(work, result, attempt)` puts a failed day back among the pending ones after a delay:
it waits there holding no worker, no pool slot and no share of the cap, and is dispatched again
in its place in the order (the newest day first) once its delay is over.
"""

from __future__ import annotations

import bisect
import datetime as dt
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from atlas_dagster.partitions import newest_first

WorkT = TypeVar("WorkT")
ResultT = TypeVar("ResultT")

EVENT_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class OrderedWork(Generic[WorkT]):
    """One unit of work (a tenant-day of one domain) and where it sits in the order."""

    work: WorkT
    tenant_key: str
    lane: Hashable
    partition_date: dt.date
    position: int


@dataclass
class Outcome(Generic[WorkT, ResultT]):
    """What a worker reports: the result, and whether the day counts as passed for the ramp-up."""

    slot: OrderedWork[WorkT]
    result: ResultT
    passed: bool


@dataclass
class _TenantRamp:
    ramp_dates: frozenset[dt.date]
    ramp_pending: int
    ramp_failed: bool = False

    @property
    def finished(self) -> bool:
        return self.ramp_pending == 0

    @property
    def passed(self) -> bool:
        return self.finished and not self.ramp_failed


@dataclass
class _State:
    in_flight_by_tenant: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    started: set[int] = field(default_factory=set)
    done: set[int] = field(default_factory=set)
    dispatched: set[int] = field(default_factory=set)


Execute = Callable[[WorkT, threading.Event, Callable[[], None]], tuple[ResultT, bool]]
# (work, failed result, attempt just made) -> seconds until the next try, or None: final.
Retry = Callable[[WorkT, ResultT, int], float | None]


class LoadScheduler(Generic[WorkT, ResultT]):
    """Runs `execute(work, canceled, mark_started)` for every slot under the ordering rules.

    `execute` must call `mark_started()` right before its INSERT (after waiting for a pool slot)
    and return (result, passed). Worker threads dispatch the next slots as soon as the state
    allows; outcomes are yielded in completion order on the calling thread, so the caller can
    emit Dagster events as days finish without holding up the next day.
    """

    def __init__(
        self,
        slots: Sequence[OrderedWork[WorkT]],
        execute: Execute,
        parallelism: int,
        ramp_days: int,
        capacity: Callable[[], int] | None = None,
        retry: Retry | None = None,
    ) -> None:
        self.slots = sorted(slots, key=lambda s: s.position)
        self.execute = execute
        self.parallelism = max(1, parallelism)
        # Called with the lock held, before each dispatch: must not do I/O.
        self.capacity = capacity
        self.retry = retry
        # Per position: tries made so far, and when a day waiting to retry may go again.
        self._attempts: dict[int, int] = defaultdict(int)
        self._not_before: dict[int, float] = {}
        self.canceled = threading.Event()
        self._events: queue.Queue[tuple[str, int, object]] = queue.Queue()
        # Guards the state: worker threads update it and dispatch the next slots themselves.
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._state = _State()
        self._pending = list(self.slots)
        self._lane_predecessor = self._predecessors()
        self._ramps = self._ramp_plan(ramp_days)

    def _predecessors(self) -> dict[int, int | None]:
        previous: dict[Hashable, int] = {}
        predecessor: dict[int, int | None] = {}
        for slot in self.slots:
            predecessor[slot.position] = previous.get(slot.lane)
            previous[slot.lane] = slot.position
        return predecessor

    def _ramp_plan(self, ramp_days: int) -> dict[str, _TenantRamp]:
        dates: dict[str, set[dt.date]] = defaultdict(set)
        for slot in self.slots:
            dates[slot.tenant_key].add(slot.partition_date)
        ramps = {
            tenant_key: _TenantRamp(frozenset(newest_first(tenant_dates)[:ramp_days]), 0)
            for tenant_key, tenant_dates in dates.items()
        }
        # One pass: a fleet run holds 100 tenants × 365 days × 4 domains (146k slots).
        for slot in self.slots:
            ramp = ramps[slot.tenant_key]
            if slot.partition_date in ramp.ramp_dates:
                ramp.ramp_pending += 1
        return ramps

    def has_pending(self) -> bool:
        """Whether slots are still to be dispatched (none once the run is canceled)."""
        with self._lock:
            return bool(self._pending) and not self.canceled.is_set()

    def in_flight(self) -> int:
        """Slots handed to a worker and not yet done (a day waiting to retry is not one): what a
        caller watching the workers compares with the works it sees running."""
        with self._lock:
            return len(self._state.dispatched) - len(self._state.done)

    def tenant_parallelism(self, tenant_key: str) -> int:
        return self.parallelism if self._ramps[tenant_key].passed else 1

    def limit(self) -> int:
        """INSERTs the run may have in flight now: `parallelism`, lowered by `capacity()`."""
        if self.capacity is None:
            return self.parallelism
        return max(0, min(self.parallelism, self.capacity()))

    def next_retry_in(self) -> float | None:
        """Seconds until the first day waiting to retry may go again, or None."""
        with self._lock:
            if not self._not_before:
                return None
            return max(0.0, min(self._not_before.values()) - time.monotonic())

    def _eligible(self, slot: OrderedWork[WorkT], in_flight: int) -> bool:
        state, ramp = self._state, self._ramps[slot.tenant_key]
        if in_flight >= self.limit():
            return False
        not_before = self._not_before.get(slot.position)
        if not_before is not None and time.monotonic() < not_before:
            return False
        before = self._lane_predecessor[slot.position]
        if before is not None and before not in state.started and before not in state.done:
            return False
        if not ramp.finished and slot.partition_date not in ramp.ramp_dates:
            return False
        return state.in_flight_by_tenant[slot.tenant_key] < self.tenant_parallelism(slot.tenant_key)

    def _dispatch(self) -> None:
        """Submits every eligible slot; called with the lock held, by any thread that changed
        the state, so that the next day starts while the caller's thread writes Dagster events
        (measured: dispatching only from the reporting thread left the engine idle half of a
        small-day backfill)."""
        state = self._state
        if self.canceled.is_set() or self._pool is None:
            return
        limit = self.limit()
        for slot in list(self._pending):
            in_flight = len(state.dispatched) - len(state.done)
            if in_flight >= limit:
                return
            if not self._eligible(slot, in_flight):
                continue
            self._pending.remove(slot)
            self._not_before.pop(slot.position, None)
            state.dispatched.add(slot.position)
            state.in_flight_by_tenant[slot.tenant_key] += 1
            self._pool.submit(self._work, slot)

    def _work(self, slot: OrderedWork[WorkT]) -> None:
        def mark_started() -> None:
            with self._lock:
                self._state.started.add(slot.position)
                self._dispatch()
            self._events.put(("started", slot.position, None))

        try:
            with self._lock:
                self._attempts[slot.position] += 1
                attempt = self._attempts[slot.position]
            result, passed = self.execute(slot.work, self.canceled, mark_started)
            delay = None
            if not passed and self.retry is not None and not self.canceled.is_set():
                delay = self.retry(slot.work, result, attempt)
        except BaseException as exc:  # the caller sees it as the slot's outcome
            with self._lock:
                self._finish(slot, passed=False)
            self._events.put(("crashed", slot.position, exc))
            return
        if delay is not None:
            with self._lock:
                self._requeue(slot, delay)
                self._dispatch()
            self._events.put(("retry", slot.position, (result, attempt, delay)))
            return
        with self._lock:
            self._finish(slot, passed)
            self._dispatch()
        self._events.put(("done", slot.position, (result, passed)))

    def _requeue(self, slot: OrderedWork[WorkT], delay: float) -> None:
        """Back among the pending slots, in its place, not before `delay` seconds from now; it
        no longer counts as in flight (called with the lock held)."""
        state = self._state
        state.dispatched.discard(slot.position)
        state.in_flight_by_tenant[slot.tenant_key] -= 1
        self._not_before[slot.position] = time.monotonic() + delay
        bisect.insort(self._pending, slot, key=lambda s: s.position)

    def _finish(self, slot: OrderedWork[WorkT], passed: bool) -> None:
        state, ramp = self._state, self._ramps[slot.tenant_key]
        state.done.add(slot.position)
        state.in_flight_by_tenant[slot.tenant_key] -= 1
        if slot.partition_date in ramp.ramp_dates:
            ramp.ramp_pending -= 1
            ramp.ramp_failed = ramp.ramp_failed or not passed

    def run(
        self,
        on_started: Callable[[WorkT], None] | None = None,
        on_cancel: Callable[[list[WorkT]], None] | None = None,
        on_idle: Callable[[], None] | None = None,
        on_retry: Callable[[WorkT, ResultT, int, float], None] | None = None,
    ) -> Iterator[Outcome[WorkT, ResultT]]:
        """Yields each slot's outcome as it completes; on interruption, cancels and drains.

        The callbacks run on the calling thread: `on_started` when a work starts its INSERT,
        `on_cancel` with the works in flight when the run is interrupted (to stop their queries),
        `on_idle` whenever EVENT_POLL_SECONDS pass with nothing to report, `on_retry(work,
        result, attempt, delay)` when a failed try is put back to go again in `delay` seconds.
        A run waiting only for retries or a raised capacity re-dispatches on its own.
        """
        by_position = {slot.position: slot for slot in self.slots}
        self._pool = ThreadPoolExecutor(
            max_workers=self.parallelism, thread_name_prefix="atlas-load"
        )
        reported = 0
        try:
            with self._lock:
                self._dispatch()
            while reported < len(self.slots):
                timeout = EVENT_POLL_SECONDS
                due = self.next_retry_in()
                if due is not None:
                    timeout = min(timeout, due + 0.001)
                try:
                    kind, position, payload = self._events.get(timeout=timeout)
                except queue.Empty:
                    with self._lock:  # a retry's delay ended, or the capacity rose
                        self._dispatch()
                    if on_idle is not None:
                        on_idle()
                    continue
                slot = by_position[position]
                if kind == "started":
                    if on_started is not None:
                        on_started(slot.work)
                    continue
                if kind == "retry":
                    if on_retry is not None:
                        on_retry(slot.work, *payload)  # type: ignore[misc]
                    continue
                reported += 1
                if kind == "crashed":
                    raise payload  # type: ignore[misc]
                result, passed = payload  # type: ignore[misc]
                yield Outcome(slot, result, passed)
        finally:
            # Interrupted (a canceled run) or crashed: start nothing new, let in-flight loads
            # finish their own cleanup (they watch `canceled`), then return.
            with self._lock:
                unfinished = len(self._state.done) < len(self.slots)
                if unfinished:
                    self.canceled.set()
                in_flight = sorted(self._state.dispatched - self._state.done)
            if unfinished and on_cancel is not None and in_flight:
                on_cancel([by_position[position].work for position in in_flight])
            self._pool.shutdown(wait=True, cancel_futures=True)
