"""The INSERT pool and the limit every run follows (orchestration/insert_limit.py): seeded by
the project, an operator's limit kept (0: stop) and followed live by a running run, above 4
refused."""

from __future__ import annotations

import datetime as dt
import random
import threading
import time

import pytest
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, instance_for_test
from dagster._core.test_utils import create_run_for_test

from atlas_dagster.cli.demo_data import GENERATORS, write_day
from atlas_dagster.core.waits import PoolLimitError
from atlas_dagster.definitions import build_definitions
from atlas_dagster.orchestration import insert_limit
from atlas_dagster.orchestration.backpressure import Backpressure
from atlas_dagster.orchestration.insert_limit import InsertLimit, live_limit, seed_pool
from atlas_dagster.orchestration.pools import (
    INSERT_POOL,
    WAITING_READ_SECONDS,
    ClaimCanceled,
    InsertSlots,
    holders,
)
from atlas_dagster.settings import LoadSettings, Settings, SettingsError
from atlas_dagster_tests.faults_support import Lines
from testkit.gold_support import materialize_range
from testkit.insert_timeline import insert_intervals, max_overlap


def _limit(instance: DagsterInstance) -> int | None:
    return instance.event_log_storage.get_concurrency_info(INSERT_POOL).limit


def test_a_fresh_instance_gets_the_projects_limit() -> None:
    with instance_for_test() as instance:
        assert seed_pool(instance, LoadSettings.from_env({}).parallel_inserts) == 3
        assert _limit(instance) == 3
    four = LoadSettings.from_env({"ATLAS_MAX_PARALLEL_INSERTS": "4"})
    with instance_for_test() as instance:
        assert seed_pool(instance, four.parallel_inserts) == 4


def test_an_operators_lower_limit_is_kept_and_a_limit_above_four_refused() -> None:
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 2)
        assert seed_pool(instance) == 2
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 6)
        with pytest.raises(
            PoolLimitError, match="allows 6 concurrent INSERTs, above the hard cap of 4"
        ):
            seed_pool(instance)


def test_a_default_limit_above_four_is_refused() -> None:
    with instance_for_test(overrides={"concurrency": {"pools": {"default_limit": 8}}}) as instance:
        assert instance.event_log_storage.initialize_concurrency_limit_to_default(INSERT_POOL)
        with pytest.raises(PoolLimitError, match="above the hard cap of 4"):
            seed_pool(instance)


@pytest.mark.parametrize("value", ["5", "0", "three"])
def test_a_configured_parallelism_outside_one_to_four_is_refused_at_load(
    monkeypatch, value
) -> None:
    monkeypatch.setenv("ATLAS_MAX_PARALLEL_INSERTS", value)
    with pytest.raises(SettingsError, match="ATLAS_MAX_PARALLEL_INSERTS"):
        Settings.from_env()
    with pytest.raises(SettingsError):
        build_definitions()


@pytest.mark.parametrize("value", ["2", "6"])
def test_ramp_up_days_must_be_three_to_five(monkeypatch, value) -> None:
    monkeypatch.setenv("ATLAS_RAMP_UP_DAYS", value)
    with pytest.raises(SettingsError, match="between 3 and 5"):
        Settings.from_env()


def _started_run(instance: DagsterInstance) -> str:
    """A run the instance knows as STARTED: claims of unknown runs are freed as dead."""
    return create_run_for_test(instance, job_name="j", status=DagsterRunStatus.STARTED).run_id


# How long a test waits for another thread to reach a point it signals: a bound against a hang,
# never a measure of speed.
SIGNAL_SECONDS = 60.0


class FakeClock:
    """A InsertSlots clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Waiting:
    """A InsertSlots `sleep` hook: the claim it is called from tried and got no slot, so it waits
    its turn as a pending claim of the pool. Sets `event`, then polls again shortly after."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def __call__(self, seconds: float) -> None:
        self.event.set()
        time.sleep(min(seconds, 0.01))  # the poll's interval, not a synchronisation

    def wait(self, who: str) -> None:
        assert self.event.wait(SIGNAL_SECONDS), f"{who} never waited for a slot"


def _never_waits(seconds: float) -> None:
    raise AssertionError("this claim should have had a slot at once")


def _take(
    instance, run_id: str, key: str, priority: int, canceled, order: list[str], waiting: Waiting
) -> None:
    """Another run's INSERT: one claim through InsertSlots, its slot freed at its end."""
    slots = InsertSlots(instance, run_id, "raw_events", lambda: False, sleep=waiting)
    with slots.slot(key, priority, canceled):
        order.append(key)


def _waiter(instance, key: str, priority: int, canceled, order: list[str]):
    waiting = Waiting()
    thread = threading.Thread(
        target=_take,
        args=(instance, _started_run(instance), key, priority, canceled, order, waiting),
    )
    return thread, waiting


def _pending(instance: DagsterInstance) -> int:
    return len(instance.event_log_storage.get_concurrency_info(INSERT_POOL).pending_steps)


def test_slots_are_capped_and_go_to_the_newest_day_first() -> None:
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
        canceled = threading.Event()
        order: list[str] = []
        held = InsertSlots(instance, _started_run(instance), "raw_events", lambda: False)
        with held.slot("held", 100, canceled):
            waiters = [
                _waiter(instance, key, priority, canceled, order)
                for key, priority in (("older", 10), ("newer", 20))
            ]
            for thread, _ in waiters:
                thread.start()
            for (_, waiting), who in zip(waiters, ("older", "newer"), strict=True):
                waiting.wait(who)  # it tried and got no slot: the one slot is held
            assert order == [] and _pending(instance) == 3  # the held claim and both waiting
        for thread, _ in waiters:
            thread.join(timeout=SIGNAL_SECONDS)
            assert not thread.is_alive()
        assert order == ["newer", "older"]
        assert _claimed(instance) == []


def test_a_canceled_claim_gives_up_and_frees_its_place() -> None:
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
        canceled = threading.Event()
        held = InsertSlots(instance, _started_run(instance), "raw_events", lambda: False)
        with held.slot("held", 1, threading.Event()):
            canceled.set()
            waiting = InsertSlots(instance, _started_run(instance), "raw_events", lambda: False)
            with pytest.raises(ClaimCanceled):
                with waiting.slot("waiting", 2, canceled):
                    pass
        info = instance.event_log_storage.get_concurrency_info(INSERT_POOL)
        assert info.claimed_slots == [] and info.pending_steps == []


def test_a_running_run_follows_the_operators_pool_limit_live() -> None:
    """The one limit a run dispatches by: the pool's live limit, lowered by the backpressure. An
    operator's raise widens a run at full width at once; one under pushback keeps its lower
    limit; a stop (0) is reported and left to the claims (bounded waits)."""
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 2)
        log = Lines()
        limit = InsertLimit.start(instance, 3, lambda width: Backpressure(width, log), log)
        assert (limit.capacity(), limit.live()) == (2, 2)  # the operator's 2, not the setting's 3
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 4)
        limit.refresh()  # within POOL_READ_SECONDS of the last read: not read again yet
        assert limit.capacity() == 2
        limit.refresh(force=True)
        assert (limit.capacity(), limit.live()) == (4, 4)
        assert "the operator set pool atlas_insert 2 -> 4" in log.lines[-1]
        limit.pressure.pushback("a partition at parts_to_delay_insert", severe=True)
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 3)
        limit.refresh(force=True)
        assert (limit.capacity(), limit.live()) == (1, 3)  # still under pushback, below 3
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 0)
        limit.refresh(force=True)
        assert limit.live() == 0 and "INSERTs are stopped" in log.lines[-1]
        limit.pressure.set_paused(True, "atlas-dagster pause")
        assert limit.capacity() == 0


def test_a_pool_an_operator_set_to_zero_stops_new_inserts_until_raised() -> None:
    """0 is the operator's stop: a run starting does not re-seed it from
    ATLAS_MAX_PARALLEL_INSERTS, its claims wait (saying why) and go once the pool is raised."""
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 0)
        assert seed_pool(instance, 3) == 0  # the operator's stop stays…
        assert _limit(instance) == 0 and live_limit(instance, 3) == 0  # …and is what counts
        assert "set to 0: INSERTs are stopped" in holders(instance)
        canceled = threading.Event()
        order: list[str] = []
        thread, waiting = _waiter(instance, "day 5", 5, canceled, order)
        try:
            thread.start()
            waiting.wait("the claim")  # it tried and got no slot
            assert order == [] and _claimed(instance) == []
            instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
            thread.join(timeout=SIGNAL_SECONDS)
        finally:
            canceled.set()  # a claim still waiting (the failure case) gives up
            thread.join(timeout=SIGNAL_SECONDS)
        assert order == ["day 5"]


def test_a_stop_takes_the_slot_a_run_keeps_at_the_end_of_its_insert() -> None:
    """A run keeps its slot between INSERTs while nobody waits; a pool lowered to 0 meanwhile
    gets it back when the INSERT in flight ends, and the run's next INSERT waits for a raise."""
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
        waiting = Waiting()
        slots = InsertSlots(
            instance, _started_run(instance), "raw_events", lambda: True, sleep=waiting
        )
        canceled = threading.Event()
        with slots.slot("day 9", 9, canceled):
            instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 0)
        assert _claimed(instance) == []  # not kept: the operator stopped the pool
        order: list[str] = []

        def next_insert() -> None:
            with slots.slot("day 8", 8, canceled):
                order.append("day 8")

        thread = threading.Thread(target=next_insert)
        try:
            thread.start()
            waiting.wait("the run's next INSERT")
            assert order == []
            instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
            thread.join(timeout=SIGNAL_SECONDS)
        finally:
            canceled.set()
            thread.join(timeout=SIGNAL_SECONDS)
        assert order == ["day 8"]
        slots.release()


def _claimed(instance: DagsterInstance) -> list[tuple[str, str]]:
    info = instance.event_log_storage.get_concurrency_info(INSERT_POOL)
    return [(s.run_id, s.step_key) for s in info.claimed_slots]


def test_a_run_keeps_its_slot_between_inserts_while_nobody_waits() -> None:
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 2)
        run_id = _started_run(instance)
        more = [True]
        slots = InsertSlots(instance, run_id, "raw_events", lambda: more[0])
        canceled = threading.Event()
        with slots.slot("raw_events[casino|day 3]", 3, canceled):
            first = _claimed(instance)
        assert _claimed(instance) == first  # kept between the two INSERTs
        with slots.slot("raw_events[casino|day 2]", 2, canceled):
            assert _claimed(instance) == first  # the same slot, no new claim
        more[0] = False  # the run's last INSERT: its slot goes back to the pool
        with slots.slot("raw_events[casino|day 1]", 1, canceled):
            assert _claimed(instance) == first
        assert _claimed(instance) == []
        ((_, step_key),) = first
        assert step_key.startswith("raw_events[insert slot 1]@")  # the worker, for dead claims
        more[0] = True
        with slots.slot("raw_events[casino|day 0]", 0, canceled):
            pass
        assert len(_claimed(instance)) == 1
        slots.release()  # the run's loads ended
        info = instance.event_log_storage.get_concurrency_info(INSERT_POOL)
        assert info.claimed_slots == [] and info.pending_steps == []


def test_a_kept_slot_goes_to_a_waiting_claim_of_another_run() -> None:
    """The cap holds, and a newer day of another run waiting for the pool gets the slot at the
    end of the current INSERT, before this run's next (older) day."""
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
        slots = InsertSlots(instance, _started_run(instance), "raw_events", lambda: True)
        canceled = threading.Event()
        order: list[str] = []
        other, waiting = _waiter(instance, "newer", 20, canceled, order)
        try:
            with slots.slot("older run, day 10", 10, canceled):
                other.start()
                waiting.wait("the other run's claim")  # pending: the kept slot's, and this one
                order.append("older run, day 10")
            with slots.slot("older run, day 9", 9, canceled):
                order.append("older run, day 9")
            other.join(timeout=SIGNAL_SECONDS)
        finally:
            canceled.set()  # a claim still waiting (the failure case) gives up
            other.join(timeout=SIGNAL_SECONDS)
        slots.release()
        assert order == ["older run, day 10", "newer", "older run, day 9"]
        assert _claimed(instance) == []


def test_a_waiting_claim_is_seen_once_the_runs_last_read_is_older_than_its_bound() -> None:
    """InsertSlots reads "does another claim wait?" at most every WAITING_READ_SECONDS: within that
    bound a kept slot stays kept on a stale "no" (the read is what cost the load), and the first
    INSERT to end after it reads again and gives the slot to the waiting claim.

    On the run's own clock, which moves only here: just inside the bound, then at it."""
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
        clock = FakeClock()
        slots = InsertSlots(
            instance,
            _started_run(instance),
            "raw_events",
            lambda: True,
            clock=clock,
            sleep=_never_waits,  # its one claim (day 10's) finds the pool free
        )
        canceled = threading.Event()
        order: list[str] = []
        with slots.slot("day 10", 10, canceled):  # ends with a fresh read at 0: nobody waits
            order.append("day 10")
        kept = _claimed(instance)
        assert len(kept) == 1
        other, waiting = _waiter(instance, "newer", 20, canceled, order)
        other.start()
        try:
            waiting.wait("the other run's claim")  # pending: the kept slot's, and this one
            clock.now = WAITING_READ_SECONDS - 0.001
            with slots.slot("day 9", 9, canceled):  # the kept slot, kept on the stale "no"
                order.append("day 9")
            assert _claimed(instance) == kept and order == ["day 10", "day 9"]
            clock.now = WAITING_READ_SECONDS
            with slots.slot("day 8", 8, canceled):  # still kept; its end reads and frees it
                order.append("day 8")
            other.join(timeout=SIGNAL_SECONDS)
        finally:
            canceled.set()  # a claim still waiting (the failure case) gives up
            other.join(timeout=SIGNAL_SECONDS)
        assert order == ["day 10", "day 9", "day 8", "newer"]
        slots.release()
        assert _claimed(instance) == []


def _run_log_says(instance: DagsterInstance, text: str) -> bool:
    return any(
        text in (entry.user_message or "")
        for run in instance.get_runs()
        for entry in instance.all_logs(run.run_id)
    )


def _raw_run_in_thread(
    clickhouse, tenant, instance: DagsterInstance, days: list[dt.date]
) -> tuple[threading.Thread, list[object]]:
    """One ranged raw run of the tenant's user days, started in a thread; its result lands in
    the list once it ends."""
    outcome: list[object] = []
    run = threading.Thread(
        target=lambda: outcome.append(
            materialize_range(clickhouse, tenant, ["user"], instance, days[0], days[-1])
        )
    )
    run.start()
    return run, outcome


def test_a_raw_run_starts_no_insert_while_the_pool_is_stopped_and_loads_once_raised(
    clickhouse, make_tenant
) -> None:
    """The operator's stop on a real raw run: it waits at its first INSERT, saying why, with no
    day loaded; raised to 1, the run loads every day."""
    tenant = make_tenant(("user",))
    days = [dt.date(2026, 11, 3), dt.date(2026, 11, 4)]
    for day in days:
        write_day(tenant, "user", day, GENERATORS["user"][0](random.Random(7), tenant, day, 30))
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 0)
        run, outcome = _raw_run_in_thread(clickhouse, tenant, instance, days)
        try:
            deadline = time.monotonic() + SIGNAL_SECONDS
            while not (_run_log_says(instance, "INSERTs are stopped") and _pending(instance)):
                assert time.monotonic() < deadline, "the run never reported the pool stopped"
                assert run.is_alive(), f"the run ended while the pool was stopped: {outcome}"
                time.sleep(0.2)
            assert _pending(instance) == 1 and _claimed(instance) == []
            assert not instance.fetch_materializations(AssetKey("tbt_raw_events_user"), 10).records
            instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
            run.join(timeout=SIGNAL_SECONDS * 2)
        finally:
            if run.is_alive():  # the failure case: let the run go so that the test ends
                instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
                run.join(timeout=SIGNAL_SECONDS * 2)
        [result] = outcome
        assert result.success  # type: ignore[attr-defined]
        loaded = instance.fetch_materializations(AssetKey("tbt_raw_events_user"), 10).records
        assert len(loaded) == len(days)
        assert _limit(instance) == 1  # the operator's value, not re-seeded by the run


def test_a_raw_run_widens_when_the_operator_raises_the_pool(
    clickhouse, make_tenant, monkeypatch
) -> None:
    """The operator's live knob on a real raw run: started with the pool at 1, the run loads one
    day at a time; raised to 3 mid-run, it dispatches by the new limit (InsertLimit re-reads the
    pool from the run's thread) and its next INSERTs overlap. A run that planned its width once,
    at its start, stays at 1 until it ends."""
    monkeypatch.setattr(insert_limit, "POOL_READ_SECONDS", 0.2)  # the run notices at once
    first = dt.date(2026, 11, 1)
    tenant = make_tenant(("user",), start=first, end=first + dt.timedelta(days=15))
    days = [first + dt.timedelta(days=i) for i in range(16)]
    rng = random.Random(11)
    for day in days:
        write_day(tenant, "user", day, GENERATORS["user"][0](rng, tenant, day, 20_000))
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
        run, outcome = _raw_run_in_thread(clickhouse, tenant, instance, days)
        try:
            deadline = time.monotonic() + SIGNAL_SECONDS
            key = AssetKey("tbt_raw_events_user")
            while len(instance.fetch_materializations(key, 100).records) < 4:
                assert time.monotonic() < deadline, "the run loaded no 4 days"
                assert run.is_alive(), f"the run ended before the pool was raised: {outcome}"
                time.sleep(0.05)
            raised_at = time.time()
            instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 3)
        finally:
            run.join(timeout=SIGNAL_SECONDS * 3)
        [result] = outcome
        assert result.success  # type: ignore[attr-defined]
        [record] = instance.get_run_records()
        intervals = insert_intervals(instance, [record.dagster_run.run_id])
        assert _run_log_says(instance, "the operator set pool atlas_insert 1 -> 3")
    before = [i for i in intervals if i.started_at < raised_at]
    after = [i for i in intervals if i.started_at > raised_at]
    assert len(intervals) == len(days) and len(before) >= 4 and len(after) >= 6
    assert max_overlap(before) == 1  # the operator's 1 held while it was set
    assert max_overlap(after) >= 2, [(i.partition_key, i.started_at, i.finished_at) for i in after]
