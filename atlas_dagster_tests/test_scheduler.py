"""The in-run load scheduler's ordering rules, with stand-in work the test steps through (no
engine needed, and no clock: what ran side by side is read from the order of events)."""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass

import pytest

from atlas_dagster.orchestration.scheduler import LoadScheduler, OrderedWork

NEWEST = dt.date(2026, 11, 30)
# How long the test waits for a worker or the scheduler to reach a point it signals: a bound
# against a hang, never a measure of speed.
SIGNAL_SECONDS = 60.0


@dataclass(frozen=True)
class Work:
    tenant: str
    domain: str
    day: dt.date


class Timeline:
    """Stand-in work that stays inside its 'INSERT' until the test ends it, recording on a logical
    clock (one tick per start or end) when each work started and ended, and how many overlapped.

    `run(scheduler)` ends the works one at a time, the oldest start first, each only once the
    scheduler has settled: every slot it handed to a worker is inside its INSERT (the works seen
    running are as many as `scheduler.in_flight()`). So the overlaps recorded are exactly what
    the scheduler allowed, however fast or loaded the machine is."""

    def __init__(self, failing: frozenset = frozenset()) -> None:
        self.failing = failing
        self.cond = threading.Condition()
        self.tick = 0
        self.starts: list[Work] = []
        self.intervals: dict[Work, tuple[int, int]] = {}
        self._started_at: dict[Work, int] = {}
        self._running: list[Work] = []  # inside their INSERT, oldest start first
        self._end: dict[Work, threading.Event] = {}
        self._finished = False

    def execute(self, work: Work, canceled: threading.Event, mark_started):
        mark_started()
        end = threading.Event()
        with self.cond:
            self.tick += 1
            self._started_at[work] = self.tick
            self.starts.append(work)
            self._running.append(work)
            self._end[work] = end
            self.cond.notify_all()
        assert end.wait(SIGNAL_SECONDS), f"{work} was never ended"
        return work, work not in self.failing

    def _settled(self, scheduler: LoadScheduler) -> bool:
        # Read the running works first: both counts only grow until the test ends a work, and
        # the running ones are among those in flight, so equal counts mean every slot in flight
        # is running (and the last work ended has finished and dispatched what it freed).
        running = len(self._running)
        return self._finished or (running > 0 and running == scheduler.in_flight())

    def run(self, scheduler: LoadScheduler) -> list[Work]:
        """Runs the scheduler, ending its works one by one; returns them in completion order."""
        finished: list[Work] = []
        crashed: list[BaseException] = []

        def consume() -> None:
            try:
                for outcome in scheduler.run():
                    with self.cond:  # a work's end and the dispatches it allowed are done
                        finished.append(outcome.slot.work)
                        self.cond.notify_all()
            except BaseException as exc:  # re-raised on the test's thread
                crashed.append(exc)
            finally:
                with self.cond:
                    self._finished = True
                    self.cond.notify_all()

        consumer = threading.Thread(target=consume)
        consumer.start()
        try:
            for _ in scheduler.slots:
                with self.cond:
                    settled = self.cond.wait_for(lambda: self._settled(scheduler), SIGNAL_SECONDS)
                    assert settled, (
                        f"the scheduler did not settle: {scheduler.in_flight()} in flight, "
                        f"running {self._running}"
                    )
                    if self._finished:
                        break
                    work = self._running.pop(0)
                    self.tick += 1
                    self.intervals[work] = (self._started_at.pop(work), self.tick)
                    end = self._end.pop(work)
                end.set()
        finally:
            with self.cond:  # a failed test lets the works still inside go
                for end in self._end.values():
                    end.set()
            consumer.join(SIGNAL_SECONDS)
        assert not consumer.is_alive(), "the scheduler never ended"
        if crashed:
            raise crashed[0]
        return finished

    def max_overlap(self, works: set[Work] | None = None) -> int:
        chosen = [v for k, v in self.intervals.items() if works is None or k in works]
        edges = sorted([(s, 1) for s, _ in chosen] + [(e, -1) for _, e in chosen])
        peak = current = 0
        for _, delta in edges:
            current += delta
            peak = max(peak, current)
        return peak


def _slots(tenants: list[str], domains: list[str], days: int) -> list[OrderedWork[Work]]:
    works = [
        Work(t, d, NEWEST - dt.timedelta(days=i))
        for i in range(days)
        for t in tenants
        for d in domains
    ]
    return [OrderedWork(w, w.tenant, (w.tenant, w.domain), w.day, i) for i, w in enumerate(works)]


def _run(slots, timeline: Timeline, parallelism: int = 3, ramp_days: int = 3) -> list:
    return timeline.run(LoadScheduler(slots, timeline.execute, parallelism, ramp_days))


def test_each_lane_starts_newest_day_first() -> None:
    timeline = Timeline()
    finished = _run(_slots(["a"], ["casino", "user", "sportsbook"], 8), timeline)
    assert len(finished) == 24
    for domain in ("casino", "user", "sportsbook"):
        lane = [w.day for w in timeline.starts if w.domain == domain]
        assert lane == sorted(lane, reverse=True) and len(lane) == 8


def test_ramp_up_is_one_at_a_time_then_parallel() -> None:
    timeline = Timeline()
    slots = _slots(["a"], ["casino", "user"], 8)
    _run(slots, timeline, parallelism=3, ramp_days=3)
    ramp = {w for w in timeline.intervals if w.day > NEWEST - dt.timedelta(days=3)}
    after = set(timeline.intervals) - ramp
    assert len(ramp) == 6 and timeline.max_overlap(ramp) == 1
    # Nothing after the ramp starts before every ramp day has finished.
    assert min(timeline.intervals[w][0] for w in after) >= max(
        timeline.intervals[w][1] for w in ramp
    )
    # Days of one lane may overlap once started in order, so two lanes still fill three slots.
    assert timeline.max_overlap(after) == 3


def test_parallelism_never_exceeds_the_limit_across_lanes() -> None:
    timeline = Timeline()
    _run(_slots(["a"], ["casino", "user", "sportsbook", "transactions"], 6), timeline, 3, 3)
    after = {w for w in timeline.intervals if w.day <= NEWEST - dt.timedelta(days=3)}
    assert timeline.max_overlap() == 3
    assert timeline.max_overlap(after) == 3


def test_a_failed_ramp_day_keeps_the_tenant_at_one() -> None:
    failing = frozenset({Work("a", "casino", NEWEST - dt.timedelta(days=1))})
    timeline = Timeline(failing=failing)
    _run(_slots(["a"], ["casino", "user", "sportsbook"], 6), timeline, 3, 3)
    assert len(timeline.intervals) == 18
    assert timeline.max_overlap() == 1


def test_tenants_ramp_up_independently_under_one_limit() -> None:
    timeline = Timeline()
    _run(_slots(["a", "b"], ["casino"], 5), timeline, parallelism=3, ramp_days=3)
    for tenant in ("a", "b"):
        ramp = {
            w
            for w in timeline.intervals
            if w.tenant == tenant and w.day > NEWEST - dt.timedelta(days=3)
        }
        assert timeline.max_overlap(ramp) == 1
    assert timeline.max_overlap() <= 3


def test_interrupting_the_run_starts_nothing_new() -> None:
    """Closing the outcomes (what a canceled Dagster run does to the step's generator) cancels
    the run: the day in flight sees it and ends, and neither its end nor anything later
    dispatches a pending day; once close() has returned no worker of the run is left."""
    before = set(threading.enumerate())
    lock = threading.Lock()
    starts: list[Work] = []
    next_day = NEWEST - dt.timedelta(days=1)

    def execute(work: Work, canceled: threading.Event, mark_started):
        mark_started()
        with lock:
            starts.append(work)
        if work.day != NEWEST:  # the next ramp day: in flight until the run is canceled
            assert canceled.wait(SIGNAL_SECONDS), "the day in flight never saw the cancel"
        return work, True

    def on_cancel(in_flight: list[Work]) -> None:
        """Before the run's workers are shut down: the day in flight ends and its worker does
        all it does after a day (the moment a late dispatch would start the next one)."""
        assert [w.day for w in in_flight] == [next_day]
        deadline = time.monotonic() + SIGNAL_SECONDS
        while scheduler.in_flight():
            assert time.monotonic() < deadline, "the day in flight never ended"
            time.sleep(0.001)

    scheduler = LoadScheduler(_slots(["a"], ["casino"], 10), execute, 3, 3)
    outcomes = scheduler.run(on_cancel=on_cancel)
    assert next(outcomes).slot.work.day == NEWEST  # the next ramp day is dispatched meanwhile
    outcomes.close()
    assert scheduler.canceled.is_set() and not scheduler.has_pending()
    assert [w.day for w in starts] == [NEWEST, next_day]
    # close() returns once the run's workers have ended (it shuts their pool down and waits):
    # from here on nothing can start a day, however long one waits.
    workers = [t for t in threading.enumerate() if t.name.startswith("atlas-load")]
    assert [t for t in workers if t not in before] == []


def test_a_crashing_worker_fails_the_run() -> None:
    def execute(work, canceled, mark_started):
        raise RuntimeError("bug")

    scheduler = LoadScheduler(_slots(["a"], ["casino"], 2), execute, 3, 3)
    with pytest.raises(RuntimeError, match="bug"):
        list(scheduler.run())
