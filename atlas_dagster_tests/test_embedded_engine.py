"""The embedded engine: kept open between units of work, handed over when another process waits."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from atlas_dagster.resources import embedded_engine
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import embedded_path
from atlas_dagster.resources.embedded_engine import InflightBytes, other_waiters

pytestmark = pytest.mark.slow  # seconds per test: real loads and runs

WAITER = textwrap.dedent(
    """
    import sys, time
    from atlas_dagster.resources.clickhouse import ClickHouseResource
    started = time.monotonic()
    with ClickHouseResource(dsn=sys.argv[1], lock_wait_seconds=60).session() as client:
        client.command("SELECT 1")
        open(sys.argv[2], "w").close()  # the holder counts its units until this appears
    print(f"{time.monotonic() - started:.2f}")
    """
)


def test_a_kept_engine_serves_many_sessions_with_one_open(tmp_path: Path) -> None:
    clickhouse = ClickHouseResource(dsn=f"chdb://{tmp_path / 'engine'}")
    with clickhouse.kept_open():
        with clickhouse.session() as first:
            first.command("SELECT 1")
        with clickhouse.session() as second:
            assert second is first  # not reopened: nobody else was waiting
    with clickhouse.session() as fresh:
        assert fresh is not first  # the scope closed it


def test_a_waiting_process_gets_the_engine_after_the_current_unit(tmp_path: Path) -> None:
    dsn = f"chdb://{tmp_path / 'engine'}"
    clickhouse = ClickHouseResource(dsn=dsn)
    with clickhouse.kept_open():
        got_engine = tmp_path / "waiter-got-the-engine"
        deadline = time.monotonic() + 30
        with clickhouse.session() as client:  # the current unit: the waiter queues during it
            client.command("SELECT 1")
            waiter = subprocess.Popen(
                [sys.executable, "-c", WAITER, dsn, str(got_engine)],
                stdout=subprocess.PIPE,
                text=True,
            )
            while not other_waiters(embedded_path(dsn)):  # the other process is queued
                assert time.monotonic() < deadline and waiter.poll() is None
                time.sleep(0.05)
            client.command("SELECT sleep(0.2)")
        units_before_handover = 0
        while True:  # keep working: each unit ends with a handover check
            with clickhouse.session() as client:
                if got_engine.exists():  # this unit started after the waiter's
                    break
                client.command("SELECT sleep(0.2)")
            units_before_handover += 1
            assert time.monotonic() < deadline, "the waiting process never got the engine"
        waiter.wait(timeout=30)
        waited = float(waiter.stdout.read())
        with clickhouse.session() as client:  # and the holder gets it back afterwards
            assert client.command("SELECT 1") == 1
    assert waiter.returncode == 0
    # The unit running when the waiter queued was the last one before the handover.
    assert units_before_handover == 0, units_before_handover
    print(f"\nthe waiter had the engine after {waited:.2f}s")


def test_waiter_entries_of_dead_processes_are_ignored(tmp_path: Path) -> None:
    data_dir = tmp_path / "engine"
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    folder = data_dir.parent / f"{data_dir.name}.waiting"
    folder.mkdir(parents=True)
    (folder / f"{gone.stdout.strip()}-1").touch()
    (folder / f"{os.getpid()}-1").touch()  # this process never counts as another waiter
    assert other_waiters(data_dir) == set()
    assert not (folder / f"{gone.stdout.strip()}-1").exists()


def test_an_idle_kept_engine_is_handed_over_without_another_unit(tmp_path: Path) -> None:
    """A run waiting for an INSERT slot between units must not keep the engine from the run that
    holds the slot and waits for the engine (a deadlock until the engine wait times out)."""
    dsn = f"chdb://{tmp_path / 'engine'}"
    clickhouse = ClickHouseResource(dsn=dsn)
    with clickhouse.kept_open():
        with clickhouse.session() as client:
            client.command("SELECT 1")
        got_engine = tmp_path / "waiter-got-the-engine"
        waiter = subprocess.run(
            [sys.executable, "-c", WAITER, dsn, str(got_engine)],
            capture_output=True,
            text=True,
            timeout=60,
        )  # this process runs no unit meanwhile: it is idle inside kept_open()
        # Had the idle engine not been handed over, the waiter would have given up at its bound
        # (60 s) instead: this process keeps it until kept_open() ends, after the waiter.
        assert waiter.returncode == 0, waiter.stderr
        assert got_engine.exists()
        print(f"\nthe waiter had the idle engine after {float(waiter.stdout):.2f}s")
        with clickhouse.session() as client:  # reopened for the holder's next unit
            assert client.command("SELECT 1") == 1


def test_units_of_two_threads_run_side_by_side_on_their_own_connections(tmp_path: Path) -> None:
    """The second thread's unit starts while the first's is still running (serialized units
    would leave the first waiting for an event only the second can set)."""
    clickhouse = ClickHouseResource(dsn=f"chdb://{tmp_path / 'engine'}")
    first_inside, second_inside = threading.Event(), threading.Event()
    clients: dict[str, object] = {}

    def second() -> None:
        assert first_inside.wait(30)
        with clickhouse.session() as client:
            clients["second"] = client
            assert client.command("SELECT 2") == 2
            second_inside.set()

    with clickhouse.kept_open():
        helper = threading.Thread(target=second)
        helper.start()
        with clickhouse.session() as client:
            clients["first"] = client
            first_inside.set()
            overlapped = second_inside.wait(30)
            assert client.command("SELECT 1") == 1
        helper.join(timeout=30)
    assert overlapped, "the second unit did not start while the first one ran"
    assert clients["first"] is not clients["second"]


def test_a_waiting_process_stops_new_units_until_it_had_the_engine(
    tmp_path: Path, monkeypatch
) -> None:
    """A unit asked for while another process waits for the engine starts only after that
    process had it: the late unit has seen the waiter (and so decided to wait) before the unit
    in flight ends and hands the engine over."""
    dsn = f"chdb://{tmp_path / 'engine'}"
    clickhouse = ClickHouseResource(dsn=dsn)
    got_engine = tmp_path / "waiter-got-the-engine"
    seen_by_late_unit: list[bool] = []
    late_saw_the_waiter = threading.Event()
    looked_up = embedded_engine.other_waiters

    def watched_waiters(data_dir: Path) -> set[str]:
        """What KeptEngine reads, under its gate, before it lets a unit start."""
        found = looked_up(data_dir)
        if found and threading.current_thread().name == "late-unit":
            late_saw_the_waiter.set()  # it will wait: the gate is held until it does
        return found

    monkeypatch.setattr(embedded_engine, "other_waiters", watched_waiters)

    def late_unit() -> None:
        with clickhouse.session() as client:
            seen_by_late_unit.append(got_engine.exists())
            client.command("SELECT 1")

    with clickhouse.kept_open():
        deadline = time.monotonic() + 30
        with clickhouse.session() as client:  # in flight while the other process queues
            client.command("SELECT 1")
            waiter = subprocess.Popen(
                [sys.executable, "-c", WAITER, dsn, str(got_engine)],
                stdout=subprocess.PIPE,
                text=True,
            )
            while not other_waiters(embedded_path(dsn)):
                assert time.monotonic() < deadline and waiter.poll() is None
                time.sleep(0.05)
            late = threading.Thread(target=late_unit, name="late-unit")
            late.start()  # sees the waiter: must not start before the other process had its turn
            assert late_saw_the_waiter.wait(30), "the late unit never looked for waiters"
            client.command("SELECT 1")
        late.join(timeout=60)
        assert waiter.wait(timeout=30) == 0
    assert seen_by_late_unit == [True], seen_by_late_unit


def test_small_days_share_the_engine_and_a_larger_one_runs_alone_in_its_turn() -> None:
    """Two small days are in flight together; a day above the limit waits until nothing is in
    flight, and a small day asking after it does not overtake it."""
    room, mb, limit = InflightBytes(), 1 << 20, 32 << 20
    events: list[str] = []
    guard = threading.Lock()
    release = threading.Event()

    def hold(name: str, nbytes: int, inside: threading.Event | None = None) -> None:
        with room.hold(nbytes, limit, name, 30):
            with guard:
                events.append(f"+{name}")
            if inside is not None:
                inside.set()
                assert release.wait(30)
            with guard:
                events.append(f"-{name}")

    def queued(count: int) -> None:
        deadline = time.monotonic() + 10
        while len(room._queue) < count:
            assert time.monotonic() < deadline
            time.sleep(0.01)

    a_in, b_in = threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=hold, args=("small-a", mb, a_in)),
        threading.Thread(target=hold, args=("small-b", mb, b_in)),
    ]
    for thread in threads:
        thread.start()
    assert a_in.wait(10) and b_in.wait(10)  # side by side
    threads.append(threading.Thread(target=hold, args=("large", 40 * mb)))
    threads[-1].start()
    queued(1)
    threads.append(threading.Thread(target=hold, args=("small-c", mb)))
    threads[-1].start()
    queued(2)
    with guard:
        assert "+large" not in events and "+small-c" not in events, events
    release.set()
    for thread in threads:
        thread.join(timeout=30)
    assert events.index("+large") > max(events.index("-small-a"), events.index("-small-b"))
    assert events.index("+small-c") > events.index("-large"), events
