"""The in-run load scheduler's ordering rules, with timed stand-in work (no engine needed)."""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass

import pytest

from atlas_dagster.orchestration.scheduler import LoadScheduler, LoadSlot

NEWEST = dt.date(2026, 11, 30)


@dataclass(frozen=True)
class Work:
    tenant: str
    domain: str
    day: dt.date


class Timeline:
    """Records when each work started and ended its 'INSERT', and how many overlapped."""

    def __init__(self, seconds: float = 0.05, failing: frozenset = frozenset()) -> None:
        self.seconds, self.failing = seconds, failing
        self.lock = threading.Lock()
        self.starts: list[Work] = []
        self.intervals: dict[Work, tuple[float, float]] = {}

    def execute(self, work: Work, canceled: threading.Event, mark_started):
        mark_started()
        started = time.monotonic()
        with self.lock:
            self.starts.append(work)
        time.sleep(self.seconds)
        with self.lock:
            self.intervals[work] = (started, time.monotonic())
        passed = work not in self.failing
        return work, passed

    def max_overlap(self, works: set[Work] | None = None) -> int:
        chosen = [v for k, v in self.intervals.items() if works is None or k in works]
        edges = sorted([(s, 1) for s, _ in chosen] + [(e, -1) for _, e in chosen])
        peak = current = 0
        for _, delta in edges:
            current += delta
            peak = max(peak, current)
        return peak


def _slots(tenants: list[str], domains: list[str], days: int) -> list[LoadSlot[Work]]:
    works = [
        Work(t, d, NEWEST - dt.timedelta(days=i))
        for i in range(days)
        for t in tenants
        for d in domains
    ]
    return [LoadSlot(w, w.tenant, (w.tenant, w.domain), w.day, i) for i, w in enumerate(works)]


def _run(slots, timeline: Timeline, parallelism: int = 3, ramp_days: int = 3) -> list:
    scheduler = LoadScheduler(slots, timeline.execute, parallelism, ramp_days)
    return [outcome.slot.work for outcome in scheduler.run()]


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
    timeline = Timeline(seconds=0.2)
    scheduler = LoadScheduler(_slots(["a"], ["casino"], 10), timeline.execute, 3, 3)
    outcomes = scheduler.run()
    next(outcomes)
    outcomes.close()  # what a canceled Dagster run does to the step's generator
    assert scheduler.canceled.is_set()
    assert len(timeline.starts) <= 2
    time.sleep(0.3)
    assert len(timeline.starts) <= 2


def test_a_crashing_worker_fails_the_run() -> None:
    def execute(work, canceled, mark_started):
        raise RuntimeError("bug")

    scheduler = LoadScheduler(_slots(["a"], ["casino"], 2), execute, 3, 3)
    with pytest.raises(RuntimeError, match="bug"):
        list(scheduler.run())
