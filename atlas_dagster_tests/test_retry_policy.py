"""The fault classification on real errors (a fresh chDB engine's, a closed loopback port's),
the retry policy's bounds, and LoadScheduler's re-queue and capacity hooks on real threads."""

from __future__ import annotations

import datetime as dt
import random
import socket
import threading
from pathlib import Path

import clickhouse_connect
import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from atlas_dagster.core.waits import ClaimCanceled, WaitTimeout
from atlas_dagster.loading.errors import LoadMismatchError
from atlas_dagster.loading.faults import classify
from atlas_dagster.loading.retry import RetryPolicy, resolve_uncertain
from atlas_dagster.orchestration.backpressure import Backpressure, Health
from atlas_dagster.orchestration.scheduler import LoadScheduler, OrderedWork
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.validation.rows import RowContractError
from atlas_dagster_tests.fake_clickhouse import fake_clickhouse


def _raised(call) -> BaseException:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the error itself is what is classified
        return exc
    raise AssertionError("expected an error")


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    client = clickhouse_connect.get_client(
        dsn=f"chdb://{tmp_path_factory.mktemp('faults') / 'data'}"
    )
    client.command("CREATE DATABASE IF NOT EXISTS f")
    client.command(
        "CREATE TABLE f.t (a UInt64) ENGINE = MergeTree ORDER BY a "
        "SETTINGS parts_to_throw_insert = 2, parts_to_delay_insert = 1"
    )
    yield client
    client.close()


def test_real_engine_errors_are_classified(engine) -> None:
    for n in range(2):  # two parts: the third INSERT is refused
        engine.command(f"INSERT INTO f.t VALUES ({n})")
    parts = _raised(lambda: engine.command("INSERT INTO f.t VALUES (9)"))
    fault = classify(parts)
    assert fault.transient and "TOO_MANY_PARTS (252)" in fault.cause and not fault.uncertain
    memory = _raised(
        lambda: engine.query(
            "SELECT groupArray(number) FROM numbers(10000000)",
            settings={"max_memory_usage": 1_000_000},
        )
    )
    assert classify(memory).transient and "MEMORY_LIMIT_EXCEEDED" in classify(memory).cause
    timeout = _raised(
        lambda: engine.query(
            "SELECT count() FROM numbers(10000000000)",
            settings={"max_execution_time": 0.05, "timeout_overflow_mode": "throw"},
        )
    )
    assert classify(timeout).transient and "TIMEOUT_EXCEEDED" in classify(timeout).cause
    missing = _raised(lambda: engine.command("SELECT * FROM f.nope"))
    assert not classify(missing).transient and "UNKNOWN_TABLE" in classify(missing).cause
    guard = _raised(lambda: engine.command("SELECT throwIf(1, 'amount is negative')"))
    assert not classify(guard).transient


def test_a_refused_connection_is_transient_and_our_own_errors_are_permanent(tmp_path: Path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the block ends: nothing listens there
    refused = _raised(lambda: socket.create_connection(("127.0.0.1", port), timeout=5))
    assert classify(refused).transient and classify(refused).uncertain
    # A contract violation caused by an engine error stays permanent; so do the others.
    for exc in (
        RowContractError("casino 2026-10-01: part-0.parquet: column amount is negative"),
        LoadMismatchError("holds 3 distinct events, the export has 4"),
        ClaimCanceled("the run was canceled"),
        WaitTimeout("gave up waiting for a slot"),
        ValueError("something unknown"),
    ):
        assert not classify(exc).transient, exc
    wrapped = _raised(_raise_contract_from_parts)
    assert not classify(wrapped).transient
    # What clickhouse-connect raises against a server (httpcommon.build_http_error's words): a
    # Cloud service waking up or scaling answers 503; a code in the header alone is enough.
    assert classify(DatabaseError("HTTP driver received HTTP status 503")).transient
    assert classify(DatabaseError("Received ClickHouse exception", code=241)).transient
    assert not classify(DatabaseError("HTTP driver received HTTP status 403")).transient


def _raise_contract_from_parts() -> None:
    try:
        raise RuntimeError("Code: 252. DB::Exception: Too many parts. (TOO_MANY_PARTS)")
    except RuntimeError as exc:
        raise RowContractError("rows break the contract") from exc


def test_backoff_doubles_with_jitter_and_is_bounded() -> None:
    policy = RetryPolicy(attempts=5, base_seconds=2.0, max_seconds=10.0)
    rng = random.Random(1)
    for attempt, step in ((1, 2.0), (2, 4.0), (3, 8.0), (4, 10.0), (9, 10.0)):
        waits = [policy.delay(attempt, rng) for _ in range(200)]
        assert step / 2 <= min(waits) and max(waits) <= step
        assert max(waits) - min(waits) > step / 4  # jittered, not one value
    transient = classify(RuntimeError("Code: 241. DB::Exception: x. (MEMORY_LIMIT_EXCEEDED)"))
    assert policy.next_try(transient, 4) is not None and policy.next_try(transient, 5) is None
    assert policy.next_try(classify(ValueError("x")), 1) is None


def _slots(days: int) -> list[OrderedWork[dt.date]]:
    first = dt.date(2026, 10, 1)
    dates = [first + dt.timedelta(days=i) for i in range(days)][::-1]  # newest first
    return [OrderedWork(d, "t", ("t", "casino"), d, i) for i, d in enumerate(dates)]


def test_a_failed_day_waits_out_of_the_cap_and_goes_again_before_older_days() -> None:
    """Day 0 (the newest) fails its first try: while it waits, older days use its share of the
    cap; once its delay is over it is dispatched before any older day still pending."""
    slots = _slots(8)
    lock, in_flight, peak, order = threading.Lock(), [0], [0], []
    tries: dict[dt.date, int] = {}
    newest = slots[0].work

    def execute(day: dt.date, canceled: threading.Event, mark_started) -> tuple[str, bool]:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            tries[day] = tries.get(day, 0) + 1
            order.append((day, tries[day]))
        mark_started()
        with lock:
            in_flight[0] -= 1
        return ("ok", True) if day != newest or tries[day] > 1 else ("failed", False)

    retried = []
    scheduler: LoadScheduler[dt.date, str] = LoadScheduler(
        slots, execute, parallelism=2, ramp_days=3, retry=lambda w, r, a: 0.3 if a < 2 else None
    )
    outcomes = list(scheduler.run(on_retry=lambda w, r, a, d: retried.append((w, a, d))))
    assert len(outcomes) == 8 and all(o.passed for o in outcomes)
    assert retried == [(newest, 1, 0.3)] and tries[newest] == 2
    assert peak[0] <= 2
    second = order.index((newest, 2))
    # Older days ran while it waited; none that was still pending went before its second try.
    assert second > 1
    assert all(day < newest for day, _ in order[second + 1 :])


def test_capacity_lowers_the_cap_and_zero_pauses_dispatching() -> None:
    slots = _slots(6)
    pressure = Backpressure(3, log=_Log())
    pressure.pushback("test", severe=True)
    assert pressure.capacity() == 1
    lock, in_flight, peak = threading.Lock(), [0], [0]
    gate = threading.Event()

    def execute(day: dt.date, canceled: threading.Event, mark_started) -> tuple[str, bool]:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        mark_started()
        assert gate.wait(30)
        with lock:
            in_flight[0] -= 1
        return "ok", True

    pressure.set_paused(True, "test")
    scheduler: LoadScheduler[dt.date, str] = LoadScheduler(
        slots, execute, parallelism=3, ramp_days=3, capacity=pressure.capacity
    )
    idles = []

    def on_idle() -> None:  # the paused scheduler idles; resumed after two idle polls
        idles.append(in_flight[0])
        if len(idles) == 2:
            pressure.set_paused(False, "test")
            gate.set()

    outcomes = list(scheduler.run(on_idle=on_idle))
    assert idles[:2] == [0, 0]  # nothing started while paused
    assert len(outcomes) == 6 and peak[0] == 1


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str) -> None:
        self.lines.append(msg)

    def warning(self, msg: str) -> None:
        self.lines.append(msg)


def test_pushback_steps_down_at_once_and_recovers_one_step_per_calm_period() -> None:
    now = [0.0]
    log, published = _Log(), []
    pressure = Backpressure(4, log, published.append, clock=lambda: now[0], recovery_seconds=10)
    pressure.transient_failure("S3 503 SlowDown")
    assert pressure.limit == 2
    pressure.observe(Health(max_parts=10, parts_to_delay_insert=1000, pushed_back_inserts=7))
    assert pressure.limit == 2  # the first probe only sets the counter's baseline
    pressure.observe(Health(max_parts=10, parts_to_delay_insert=1000, pushed_back_inserts=9))
    assert pressure.limit == 1 and "delayed or rejected 2 INSERT(s)" in log.lines[-1]
    now[0] = 5.0
    pressure.success()
    assert pressure.limit == 1  # calm for 5 s only
    for step in (2, 3, 4, 4):
        now[0] += 10.0
        pressure.success()
        assert pressure.limit == step
    assert [c.new for c in pressure.changes] == [2, 1, 2, 3, 4]
    assert published[-1].startswith("4 of 4: no pushback for 10s")
    pressure.observe(Health(max_parts=600, parts_to_delay_insert=1000, pushed_back_inserts=9))
    assert pressure.limit == 2  # a partition at 60 % of parts_to_delay_insert: half


def test_an_uncertain_insert_is_killed_then_read_from_the_query_log_never_sent_again(
    tmp_path: Path,
) -> None:
    """Against a server (a loopback listener answering like ClickHouse, fake_clickhouse.py):
    the dropped INSERT still listed in system.processes is killed, the query log is flushed
    and read, and nothing is inserted by the resolution itself."""
    with fake_clickhouse(rows=0) as fake:
        fake.still_running, fake.query_outcome = True, "QueryFinish"
        clickhouse = ClickHouseResource(dsn=f"http://default:pw@127.0.0.1:{fake.port}")
        said = resolve_uncertain(clickhouse, "atlas-q-1", threading.Event())
        bodies = [r.body for r in fake.requests]
    assert (
        said == "INSERT atlas-q-1 killed, it had finished: its rows are cleared before the next try"
    )
    order = [
        next(i for i, b in enumerate(bodies) if marker in b)
        for marker in ("system.processes", "KILL QUERY", "FLUSH LOGS", "system.query_log")
    ]
    assert order == sorted(order)
    assert all("atlas-q-1" in bodies[i] for i in (order[0], order[1], order[3]))
    assert not [b for b in bodies if "INSERT INTO" in b]
    embedded = ClickHouseResource(dsn=f"chdb://{tmp_path / 'clickhouse'}")
    assert resolve_uncertain(embedded, "q", threading.Event()).startswith("embedded: ")
