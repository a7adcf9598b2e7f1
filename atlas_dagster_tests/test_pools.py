"""The INSERT pool: seeded by the project, an operator's lower limit kept, above 4 refused."""

from __future__ import annotations

import threading

import pytest
from dagster import DagsterInstance, DagsterRunStatus, instance_for_test
from dagster._core.test_utils import create_run_for_test

from atlas_dagster.definitions import build_definitions
from atlas_dagster.orchestration.pools import (
    INSERT_POOL,
    ClaimCanceled,
    PoolLimitError,
    RunSlots,
    ensure_insert_pool,
    insert_slot,
)
from atlas_dagster.settings import LoadSettings, Settings, SettingsError


def _limit(instance: DagsterInstance) -> int | None:
    return instance.event_log_storage.get_concurrency_info(INSERT_POOL).limit


def test_a_fresh_instance_gets_the_projects_limit() -> None:
    with instance_for_test() as instance:
        assert ensure_insert_pool(instance, LoadSettings.from_env({}).parallel_inserts) == 3
        assert _limit(instance) == 3
    four = LoadSettings.from_env({"ATLAS_MAX_PARALLEL_INSERTS": "4"})
    with instance_for_test() as instance:
        assert ensure_insert_pool(instance, four.parallel_inserts) == 4


def test_an_operators_lower_limit_is_kept_and_a_limit_above_four_refused() -> None:
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 2)
        assert ensure_insert_pool(instance) == 2
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 6)
        with pytest.raises(
            PoolLimitError, match="allows 6 concurrent INSERTs, above the hard cap of 4"
        ):
            ensure_insert_pool(instance)


def test_a_default_limit_above_four_is_refused() -> None:
    with instance_for_test(overrides={"concurrency": {"pools": {"default_limit": 8}}}) as instance:
        assert instance.event_log_storage.initialize_concurrency_limit_to_default(INSERT_POOL)
        with pytest.raises(PoolLimitError, match="above the hard cap of 4"):
            ensure_insert_pool(instance)


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


def test_slots_are_capped_and_go_to_the_newest_day_first() -> None:
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
        canceled = threading.Event()
        order: list[str] = []
        with insert_slot(instance, _started_run(instance), "held", 100, canceled):
            waiters = [
                threading.Thread(
                    target=_take,
                    args=(instance, _started_run(instance), key, priority, canceled, order),
                )
                for key, priority in (("older", 10), ("newer", 20))
            ]
            for waiter in waiters:
                waiter.start()
            _wait_for_pending(instance, 2)
            assert order == []  # the one slot is held
        for waiter in waiters:
            waiter.join(timeout=10)
        assert order == ["newer", "older"]


def test_a_canceled_claim_gives_up_and_frees_its_place() -> None:
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
        canceled = threading.Event()
        with insert_slot(instance, _started_run(instance), "held", 1, threading.Event()):
            canceled.set()
            with pytest.raises(ClaimCanceled):
                with insert_slot(instance, _started_run(instance), "waiting", 2, canceled):
                    pass
        info = instance.event_log_storage.get_concurrency_info(INSERT_POOL)
        assert info.claimed_slots == [] and info.pending_steps == []


def _take(instance, run_id: str, key: str, priority: int, canceled, order: list[str]) -> None:
    with insert_slot(instance, run_id, key, priority, canceled):
        order.append(key)


def _wait_for_pending(instance: DagsterInstance, count: int) -> None:
    import time

    deadline = time.monotonic() + 10
    while len(instance.event_log_storage.get_concurrency_info(INSERT_POOL).pending_steps) < count:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _claimed(instance: DagsterInstance) -> list[tuple[str, str]]:
    info = instance.event_log_storage.get_concurrency_info(INSERT_POOL)
    return [(s.run_id, s.step_key) for s in info.claimed_slots]


def test_a_run_keeps_its_slot_between_inserts_while_nobody_waits() -> None:
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 2)
        run_id = _started_run(instance)
        more = [True]
        slots = RunSlots(instance, run_id, "raw_events", lambda: more[0])
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
        slots = RunSlots(instance, _started_run(instance), "raw_events", lambda: True)
        canceled = threading.Event()
        order: list[str] = []
        with slots.slot("older run, day 10", 10, canceled):
            other = threading.Thread(
                target=_take,
                args=(instance, _started_run(instance), "newer", 20, canceled, order),
            )
            other.start()
            _wait_for_pending(instance, 2)  # the kept slot's own claim, and the waiting one
            order.append("older run, day 10")
        with slots.slot("older run, day 9", 9, canceled):
            order.append("older run, day 9")
        other.join(timeout=10)
        slots.release()
        assert order == ["older run, day 10", "newer", "older run, day 9"]
        assert _claimed(instance) == []


def test_a_waiting_claim_is_seen_once_the_runs_last_read_is_older_than_its_bound(
    monkeypatch,
) -> None:
    """RunSlots reads "does another claim wait?" at most every WAITING_READ_SECONDS: within that
    bound a kept slot stays kept on a stale "no" (the read is what cost the load), and the first
    INSERT to end after it reads again and gives the slot to the waiting claim."""
    import time

    from atlas_dagster.orchestration import pools

    monkeypatch.setattr(pools, "WAITING_READ_SECONDS", 2.0)
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
        slots = RunSlots(instance, _started_run(instance), "raw_events", lambda: True)
        canceled = threading.Event()
        order: list[str] = []
        with slots.slot("day 10", 10, canceled):  # ends with a fresh read: nobody waits
            order.append("day 10")
        read_at = time.monotonic()
        other = threading.Thread(
            target=_take, args=(instance, _started_run(instance), "newer", 20, canceled, order)
        )
        other.start()
        try:
            _wait_for_pending(instance, 2)  # the kept slot's own claim, and the waiting one
            with slots.slot("day 9", 9, canceled):
                order.append("day 9")
            assert time.monotonic() - read_at < 2.0, "too slow to end day 9 within the bound"
            time.sleep(2.1)
            with slots.slot("day 8", 8, canceled):  # still kept; its end reads and frees it
                order.append("day 8")
            other.join(timeout=10)
        finally:
            canceled.set()  # a claim still waiting (the failure case) gives up
            other.join(timeout=10)
        assert order == ["day 10", "day 9", "day 8", "newer"]
        slots.release()
        assert _claimed(instance) == []
