"""Backpressure and pause in a real run (in-process Dagster, a fresh instance and engine): the
operator's health query turning bad steps the INSERT concurrency down to 1 within one day's load
and it steps back up once the query is good again; `atlas-dagster pause` stops new INSERTs of a
running load without cancelling it, and `resume` lets it finish."""

from __future__ import annotations

import datetime as dt
import random
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter, instance_for_test

from atlas_dagster.cli.demo_data import GENERATORS, write_day
from atlas_dagster.cli.main import main
from atlas_dagster.core.tags import CONCURRENCY_TAG
from atlas_dagster.orchestration import raw_run
from atlas_dagster.orchestration.backpressure import Backpressure, Health
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.tenants import Tenant
from atlas_dagster_tests.conftest import log_row
from testkit.gold_support import materialize_range

pytestmark = pytest.mark.slow  # real runs

FIRST = dt.date(2026, 10, 1)
WAIT_SECONDS = 120.0
CHANGE_RE = re.compile(r"^INSERT concurrency (\d) -> (\d) of (\d): (.*)$")


def _site(
    tmp_path: Path, days: int, users: int
) -> tuple[Tenant, list[dt.date], ClickHouseResource]:
    dates = [FIRST + dt.timedelta(days=i) for i in range(days)]
    tenant = Tenant(
        "bp", "main", f"file://{tmp_path / 'exports'}", dates[0], dates[-1], ("casino",)
    )
    generate, _ = GENERATORS["casino"]
    for day in dates:
        write_day(tenant, "casino", day, generate(random.Random(str(day)), tenant, day, users))
    clickhouse = ClickHouseResource(dsn=f"chdb://{tmp_path / 'clickhouse'}")
    with clickhouse.session() as client:
        ensure_schema(client)
    return tenant, dates, clickhouse


def _run(clickhouse, tenant: Tenant, instance: DagsterInstance, days: list[dt.date]):
    return materialize_range(clickhouse, tenant, ["casino"], instance, days[0], days[-1])


def _until(predicate: Callable[[], object], what: str) -> object:
    """Polls a state another thread changes (a run's progress), bounded."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"not seen within {WAIT_SECONDS:.0f}s: {what}")


def _completed(clickhouse: ClickHouseResource) -> int:
    with clickhouse.session() as client:
        return int(
            client.command(
                "SELECT count() FROM atlas.backfill_log FINAL WHERE organization_id = 'bp' "
                "AND status = 'completed'"
            )
        )


class Refusals(threading.Condition):
    """How many dispatches the scheduler refused (its capacity was 0), notified at each."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0


def _logged(clickhouse: ClickHouseResource) -> int:
    """Days with any backfill_log row: a day writes 'running' before its INSERT."""
    with clickhouse.session() as client:
        return int(
            client.command(
                "SELECT count() FROM atlas.backfill_log FINAL WHERE organization_id = 'bp'"
            )
        )


def _log(instance: DagsterInstance, run_id: str) -> list[tuple[float, str]]:
    return [
        (e.timestamp, e.user_message) for e in instance.all_logs(run_id) if not e.is_dagster_event
    ]


def _spans(result) -> list[tuple[float, float]]:
    """Each day's INSERT as (started, finished) wall times, from its materialization."""
    return sorted(
        (m.metadata["insert_started_at"].value, m.metadata["insert_finished_at"].value)
        for m in result.asset_materializations_for_node("raw_events")
    )


PROBE_SECONDS = 0.1
RECOVERY_SECONDS = 0.3
BAD_AFTER_DAYS = 6  # days at their checks before the health query turns bad
DAYS_AT_ONE = 6  # days at their checks at 1 INSERT at a time before it is good again


def test_a_bad_health_query_steps_inserts_down_to_one_and_they_recover(
    tmp_path: Path, monkeypatch
) -> None:
    """The operator's health query goes bad after 6 days: the first probe after that (in the
    session of the next day to reach its checks) steps the run down to 1 INSERT at a time; it
    stays there while the query is bad, and steps up once it has been good for the recovery time.

    The run's backpressure clock (probes due, calm before a step up) moves only when the
    operator acts, at those points of the run's progress: a probe reads the query only after
    it changed, and a step up can only come from the recovery time the operator lets pass
    (measured: the run's reporting thread saw its 6th day when workers had started 30)."""
    tenant, days, clickhouse = _site(tmp_path, 36, 400)
    health = tmp_path / "pressure.csv"
    health.write_text("0\n")
    monkeypatch.setenv("ATLAS_MAX_PARALLEL_INSERTS", "3")
    monkeypatch.setenv(
        "ATLAS_HEALTH_QUERY", f"SELECT c1 FROM file('{health}', 'CSV', 'c1 Float64')"
    )
    monkeypatch.setenv("ATLAS_HEALTH_THRESHOLD", "5")
    monkeypatch.setenv("ATLAS_HEALTH_PROBE_SECONDS", str(PROBE_SECONDS))
    monkeypatch.setenv("ATLAS_BACKPRESSURE_RECOVERY_SECONDS", str(RECOVERY_SECONDS))
    marks: dict[str, float] = {}
    probes: list[tuple[float, str, float | None, int]] = []  # (at, thread, value, limit after)
    now = [0.0]

    class OperatorPressure(Backpressure):
        """The run's Backpressure, on the operator's clock. The operator acts as the run's days
        reach their checks (each asks whether a probe is due, on its worker's thread): right
        after a day asked, so that the next day to ask probes."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, clock=lambda: now[0], **kwargs)
            self.days = self.at_one = 0
            self.acts = threading.Lock()

        def probe_due(self) -> bool:
            due = super().probe_due()
            with self.acts:
                self.days += 1
                if "bad" in marks and "good" not in marks and self.limit == 1:
                    self.at_one += 1
                    if self.at_one == DAYS_AT_ONE:  # ... and down again: the recovery time
                        health.write_text("0\n")
                        marks["good"] = time.time()
                        now[0] += RECOVERY_SECONDS + PROBE_SECONDS
                if self.days == BAD_AFTER_DAYS:  # ClickPipes lag (the query's value) goes up
                    health.write_text("9\n")
                    marks["bad"] = time.time()
                    now[0] += PROBE_SECONDS  # the next probe is due
            return due

        def observe(self, health_seen: Health) -> None:
            super().observe(health_seen)
            thread = threading.current_thread().name
            probes.append((time.time(), thread, health_seen.health_value, self.limit))

    monkeypatch.setattr(raw_run, "Backpressure", OperatorPressure)
    with instance_for_test() as instance, clickhouse.kept_open():
        result = _run(clickhouse, tenant, instance, days)
        lines = _log(instance, result.run_id)
        tags = instance.get_run_by_id(result.run_id).tags
    assert result.success
    changes = [(ts, CHANGE_RE.match(text)) for ts, text in lines if CHANGE_RE.match(text)]
    spans = _spans(result)
    t0 = marks["bad"]
    print("\ntimes from the health query turning bad (s):")
    print(f"  relief at {marks['good'] - t0:+.3f}")
    for started, finished in spans:
        print(f"  INSERT {started - t0:+.3f} .. {finished - t0:+.3f}")
    for ts, change in changes:
        print(f"  {ts - t0:+.3f} {change.group(0)}")
    for at, thread, value, limit in probes:
        print(f"  {at - t0:+.3f} probe on {thread}: {value} -> limit {limit}")
    down = [
        (ts, c) for ts, c in changes if c.group(2) == "1" and "ATLAS_HEALTH_QUERY" in c.group(4)
    ]
    assert down, changes
    down_at = down[0][0]
    # The first probe after the query turned bad read it and stepped down, in the session of a
    # day's load (a worker's), not on a later idle tick.
    after_bad = [p for p in probes if p[0] > marks["bad"]]
    assert after_bad and after_bad[0][2:] == (9.0, 1), probes
    assert after_bad[0][1].startswith("atlas-load"), after_bad[0]
    # While at 1, no two INSERTs that started after the step down overlap.
    up = [ts for ts, c in changes if ts > down_at and int(c.group(2)) > int(c.group(1))]
    assert up, "the concurrency never stepped back up"
    assert up[0] > marks["good"]
    at_one = [s for s in spans if down_at < s[0] < up[0]]
    assert len(at_one) >= 2
    for (_, finished), (started, _) in zip(at_one, at_one[1:], strict=False):
        assert finished <= started + 0.01
    assert "of 3" in tags[CONCURRENCY_TAG]
    for day in days:
        assert log_row(clickhouse, tenant, "casino", day)["status"] == "completed"


def test_pause_stops_new_inserts_of_a_running_load_and_resume_finishes_it(
    tmp_path: Path, monkeypatch
) -> None:
    """Paused (every run) before the load starts: the run starts, says it is paused and loads
    nothing while paused; `atlas-dagster resume` and it loads every day, uncancelled. (Paused
    mid-run, small days finish faster than the flag is read: 8 days of 0.1 s were all loaded.)"""
    tenant, days, clickhouse = _site(tmp_path, 6, 100)
    marks: dict[str, object] = {}
    refused = Refusals()

    class WatchedPressure(Backpressure):
        def capacity(self) -> int:  # the scheduler's lock is held: count, nothing else
            capacity = super().capacity()
            if capacity == 0:
                with refused:
                    refused.count += 1
                    refused.notify_all()
            return capacity

    monkeypatch.setattr(raw_run, "Backpressure", WatchedPressure)

    def operator(instance: DagsterInstance) -> None:
        def paused_run() -> str | None:
            for run in instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED])):
                if any(text.startswith("paused (") for _, text in _log(instance, run.run_id)):
                    return run.run_id
            return None

        try:
            marks["run_id"] = _until(paused_run, "the run saying it is paused")
            # A paused run must start nothing, however long it is paused: not a span of time but
            # the scheduler's own decisions, each a dispatch it refused (capacity 0), at its
            # start and then on idle ticks.
            with refused:
                seen = refused.count
                decided = refused.wait_for(lambda: refused.count >= seen + 3, WAIT_SECONDS)
                marks["refused_while_paused"] = refused.count - seen
            if decided:
                marks["done_while_paused"] = _completed(clickhouse)
                marks["logged_while_paused"] = _logged(clickhouse)
        finally:  # a failed wait must not leave the run paused for good
            marks["resumed"] = main(["resume"])

    with instance_for_test() as instance, clickhouse.kept_open():
        monkeypatch.setenv("DAGSTER_HOME", instance.root_directory)
        assert main(["pause"]) == 0
        thread = threading.Thread(target=operator, args=(instance,))
        thread.start()
        result = _run(clickhouse, tenant, instance, days)
        thread.join(timeout=WAIT_SECONDS)
        lines = [text for _, text in _log(instance, result.run_id)]
    assert result.success and marks["run_id"] == result.run_id and marks["resumed"] == 0
    assert marks["refused_while_paused"] >= 3, f"not 3 dispatches refused in {WAIT_SECONDS}s"
    assert marks["done_while_paused"] == 0 and marks["logged_while_paused"] == 0
    assert any(text.startswith("resumed (") for text in lines), lines
    assert _completed(clickhouse) == len(days)
