"""Fault injection: pool slots of killed processes never leak for good, and a waiting INSERT
says whom it waits on and gives up at its bound."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus
from dagster._core.test_utils import create_run_for_test

from atlas_dagster.orchestration.pools import (
    CLAIM_POLL_SECONDS,
    INSERT_POOL,
    RECLAIM_SECONDS,
    InsertSlots,
    SlotWaitTimeout,
    claims,
    reclaim_dead_claims,
)
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.embedded_engine import other_waiters
from atlas_dagster_tests.faults_support import (
    LOCK_HOLDER,
    PASS_ENDS,
    Lines,
    Process,
    fault_site,
    python,
    wait_for_table_part,
)
from testkit.bulk_exports import write_bulk_day

pytestmark = pytest.mark.slow  # real engine processes, kills and servers

LEAK_DAYS = (dt.date(2026, 11, 3), dt.date(2026, 11, 4))
KILLED_DAY = dt.date(2026, 11, 5)
KILLED_DAY_ROWS = 2_000_000  # an INSERT of a few seconds, to be killed in its middle


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    return int(done.stdout)


def test_claims_of_dead_processes_and_ended_or_unknown_runs_are_freed(tmp_path: Path) -> None:
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 3)
        started = create_run_for_test(instance, job_name="j", status=DagsterRunStatus.STARTED)
        ended = create_run_for_test(instance, job_name="j", status=DagsterRunStatus.SUCCESS)
        import socket

        dead_worker = f"{socket.gethostname()}:{_dead_pid()}:1"
        storage = instance.event_log_storage
        for run_id, step in (
            (started.run_id, f"raw_events[casino|a]@{dead_worker}"),  # its process is gone
            (ended.run_id, "raw_events[casino|b]@elsewhere:1:1"),  # its run ended
            ("no-such-run", "raw_events[casino|c]@elsewhere:1:1"),  # unknown to the instance
        ):
            assert storage.claim_concurrency_slot(INSERT_POOL, run_id, step).is_claimed
        log = Lines()
        freed = reclaim_dead_claims(instance, INSERT_POOL, log)
        assert len(freed) == 3, freed
        assert claims(instance, INSERT_POOL) == []
        assert "is gone" in str(log) and "its run ended (SUCCESS)" in str(log)
        assert "unknown to this Dagster instance" in str(log)
        # The run whose process died can never finish: it is reported failed, not left STARTED.
        assert instance.get_run_by_id(started.run_id).status == DagsterRunStatus.FAILURE


class FakeClock:
    """A clock that moves only when a claim waiting for its turn "sleeps" between two tries."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_waiting_insert_names_the_holders_and_gives_up_at_its_bound(tmp_path: Path) -> None:
    """On the waiting claim's own clock: it gives up neither before its bound nor later than the
    first look at the pool after it, and its wait's report and error name the holder."""
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        instance.event_log_storage.set_concurrency_slots(INSERT_POOL, 1)
        holder = create_run_for_test(instance, job_name="j", status=DagsterRunStatus.STARTED)
        waiter = create_run_for_test(instance, job_name="j", status=DagsterRunStatus.STARTED)
        log = Lines()
        clock = FakeClock()
        held = InsertSlots(instance, holder.run_id, "raw_events", lambda: False)
        waiting = InsertSlots(
            instance,
            waiter.run_id,
            "raw_events",
            lambda: False,
            log,
            3,  # the run's ATLAS_SLOT_WAIT_SECONDS
            clock=clock,
            sleep=clock.sleep,
        )
        with held.slot("raw_events[casino|held]", 1, threading.Event()):
            with pytest.raises(SlotWaitTimeout) as raised:
                with waiting.slot("raw_events[casino|waiting]", 2, threading.Event()):
                    pass
            gave_up_at = clock.now
            assert [c.run_id for c in claims(instance, INSERT_POOL)] == [holder.run_id]
        assert claims(instance, INSERT_POOL) == []  # the claim that gave up was withdrawn
    assert 3 < gave_up_at <= 3 + RECLAIM_SECONDS + CLAIM_POLL_SECONDS, gave_up_at
    assert "(the bound is 3s)" in str(raised.value)
    assert f"run {holder.run_id} (STARTED) step raw_events[insert slot 1]" in str(raised.value)
    assert f"waiting for a slot of pool {INSERT_POOL} for raw_events[casino|waiting]" in str(log)
    assert "waited 0s of at most 3s" in str(log)
    assert holder.run_id in str(log)  # the report names who holds the slot


def _passes_ended(holder: Process) -> int:
    return sum(1 for line in holder.lines if line.startswith(PASS_ENDS))


def _leak_while_waiting_for_the_engine(
    site, day: dt.date, instance: DagsterInstance, holder: Process
) -> str:
    """A `load` whose run took a slot and waits for the engine, SIGKILLed there.

    The load touches the engine several times before its slot claim (the CLI's check, its sweep,
    the run's bulk read): the holder lets each such wait through and retakes the engine, until
    the run holds a slot and waits again. Waiters are read before claims: a wait seen with no
    claim held afterwards cannot be the INSERT's (its claim comes first and outlives the wait),
    and the holder lets through only the waiter named."""
    load = site.load(day)
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline and load.popen.poll() is None, load.output
        waiting = sorted(w for w in other_waiters(site.data_dir) if w.startswith(f"{load.pid}-"))
        if any(c.claimed for c in claims(instance, INSERT_POOL) if str(load.pid) in c.step_key):
            break
        if waiting:
            passes = sum(1 for path in site.work.glob("pass-*"))
            ended = _passes_ended(holder)
            (site.work / f"pass-{passes}").write_text(waiting[0])
            while _passes_ended(holder) == ended:
                assert time.monotonic() < deadline, f"{holder.output}\n--- load:\n{load.output}"
                time.sleep(0.02)
        time.sleep(0.05)
    # Its slot is claimed: the run now waits for the engine the holder retook.
    load.wait_for(lambda line: "waiting for embedded ClickHouse" in line and "holder" in line)
    load.kill()
    return load.output


def test_three_leaked_slots_then_a_load_completes_saying_what_it_waited_for(
    tmp_path: Path,
) -> None:
    site = fault_site(tmp_path, "leaks", LEAK_DAYS[0], KILLED_DAY)
    for day in LEAK_DAYS:
        write_bulk_day(site.tenant, "casino", day, 1000)
    write_bulk_day(site.tenant, "casino", KILLED_DAY, KILLED_DAY_ROWS)
    clickhouse = ClickHouseResource(dsn=site.dsn, lock_wait_seconds=60)
    with clickhouse.session() as client:  # the schema up front, so the killed INSERT starts soon
        from atlas_dagster.resources.schema import apply_schema

        apply_schema(client)

    with DagsterInstance.from_config(str(site.home)) as instance:
        # Leaks 1 and 2: runs killed while waiting for the engine (no backfill_log row yet).
        holder = python(LOCK_HOLDER, str(site.data_dir), str(site.work), env=site.env)
        holder.wait_for(lambda line: line == "held")
        for day in LEAK_DAYS:
            output = _leak_while_waiting_for_the_engine(site, day, instance, holder)
            # The wait was visible in the run's log, naming the holder's process and run.
            assert f":{holder.pid}:" in output and "(Dagster run holder)" in output, output
        holder.kill()

        # Leak 3: a run killed in the middle of its INSERT ('running' left in backfill_log).
        killed = site.load(KILLED_DAY)
        killed.wait_for(lambda line: "INSERT started" in line)
        # Killed as soon as the engine writes the raw table: a fixed sleep raced an idle
        # machine, where the whole 2M-row INSERT finished inside it (seen in CI).
        wait_for_table_part(
            site.data_dir,
            "tbt_raw_events_casino",
            lambda: killed.popen.poll() is None,
            lambda: killed.output,
        )
        killed.kill()
        with clickhouse.session() as client:  # what the killed INSERT left behind
            status, partial_rows = _day_state(client)
        assert status == "running" and partial_rows < KILLED_DAY_ROWS, (status, partial_rows)
        leaked = [c for c in claims(instance, INSERT_POOL) if c.claimed]
        assert len(leaked) == 3, leaked  # every slot of the pool (limit 3) held by the dead

        # The re-run, before any sweep and with no daemon: it frees the dead claims and loads.
        rerun = site.load(KILLED_DAY)
        assert rerun.finish(timeout=300) == 0, rerun.output
        output = rerun.output
        assert f"waiting for a slot of pool {INSERT_POOL}" in output, output
        assert output.count(f"freed a slot of pool {INSERT_POOL}") == 3, output
        assert "is gone" in output
        # Its sweep (no daemon here) marked the killed attempt's 'running' day failed first.
        assert f"casino {KILLED_DAY} marked failed: stale:" in output, output
        leaked_runs = {c.run_id for c in leaked}
        statuses = {instance.get_run_by_id(r).status for r in leaked_runs}
        assert statuses == {DagsterRunStatus.FAILURE}, statuses  # not left STARTED forever
        assert [c for c in claims(instance, INSERT_POOL) if c.claimed] == []

    with clickhouse.session() as client:
        row = client.query(
            "SELECT status, rows_loaded, attempt FROM atlas.backfill_log FINAL "
            "WHERE organization_id = 'leaks' AND partition_date = {d:Date}",
            parameters={"d": KILLED_DAY},
        ).result_rows
        raw = _day_state(client)[1]
    assert row == [("completed", KILLED_DAY_ROWS, 2)], row  # the killed attempt, then this one
    assert raw == KILLED_DAY_ROWS  # exactly the export's rows: nothing of the killed INSERT


def _day_state(client) -> tuple[str, int]:
    """(the killed day's log status, its rows in the raw table)."""
    status = client.command(
        "SELECT status FROM atlas.backfill_log FINAL "
        "WHERE organization_id = 'leaks' AND partition_date = {d:Date}",
        parameters={"d": KILLED_DAY},
    )
    rows = client.command(
        "SELECT count() FROM atlas.tbt_raw_events_casino FINAL "
        "WHERE organization_id = 'leaks' AND event_date = {d:Date}",
        parameters={"d": KILLED_DAY},
    )
    return status, int(rows)
