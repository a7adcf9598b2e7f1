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
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.tenants import Tenant
from atlas_dagster_tests.conftest import log_row
from atlas_dagster_tests.gold_support import materialize_range

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


def test_a_bad_health_query_steps_inserts_down_to_one_and_they_recover(
    tmp_path: Path, monkeypatch
) -> None:
    # Days enough after relief for the recovery to show even on an idle machine: 16 days once
    # ended 0.8 s after the pressure, before a 1 s recovery (measured at ~60 ms a day).
    tenant, days, clickhouse = _site(tmp_path, 36, 400)
    health = tmp_path / "pressure.csv"
    health.write_text("0\n")
    monkeypatch.setenv("ATLAS_MAX_PARALLEL_INSERTS", "3")
    monkeypatch.setenv(
        "ATLAS_HEALTH_QUERY", f"SELECT c1 FROM file('{health}', 'CSV', 'c1 Float64')"
    )
    monkeypatch.setenv("ATLAS_HEALTH_THRESHOLD", "5")
    monkeypatch.setenv("ATLAS_HEALTH_PROBE_SECONDS", "0.1")
    monkeypatch.setenv("ATLAS_BACKPRESSURE_RECOVERY_SECONDS", "0.3")
    marks: dict[str, float] = {}

    def operator() -> None:
        """ClickPipes lag (the health query's value) goes up after 6 days, down after 12."""
        _until(lambda: _completed(clickhouse) >= 6, "6 days completed")
        health.write_text("9\n")
        marks["bad"] = time.time()
        _until(lambda: _completed(clickhouse) >= 12, "12 days completed")
        health.write_text("0\n")
        marks["good"] = time.time()

    thread = threading.Thread(target=operator)
    with instance_for_test() as instance, clickhouse.kept_open():
        thread.start()
        result = _run(clickhouse, tenant, instance, days)
        thread.join(timeout=WAIT_SECONDS)
        lines = _log(instance, result.run_id)
        tags = instance.get_run_by_id(result.run_id).tags
    assert result.success
    changes = [(ts, CHANGE_RE.match(text)) for ts, text in lines if CHANGE_RE.match(text)]
    spans = _spans(result)
    longest = max(finished - started for started, finished in spans)
    t0 = marks["bad"]
    print(f"\nlongest INSERT {longest:.3f}s; times from the health query turning bad (s):")
    print(f"  relief at {marks['good'] - t0:+.3f}")
    for started, finished in spans:
        print(f"  INSERT {started - t0:+.3f} .. {finished - t0:+.3f}")
    for ts, change in changes:
        print(f"  {ts - t0:+.3f} {change.group(0)}")
    down = [
        (ts, c) for ts, c in changes if c.group(2) == "1" and "ATLAS_HEALTH_QUERY" in c.group(4)
    ]
    assert down, changes
    down_at = down[0][0]
    # Down within one INSERT's time (the probe follows the first day to finish), plus a day's
    # checks and the probe interval.
    assert down_at - marks["bad"] <= longest + 1.0, (down_at - marks["bad"], longest)
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

    def operator(instance: DagsterInstance) -> None:
        def paused_run() -> str | None:
            for run in instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED])):
                if any(text.startswith("paused (") for _, text in _log(instance, run.run_id)):
                    return run.run_id
            return None

        marks["run_id"] = _until(paused_run, "the run saying it is paused")
        # The one timed window: a paused run must start nothing, however long it is paused.
        time.sleep(1.5)
        marks["done_while_paused"] = _completed(clickhouse)
        assert main(["resume"]) == 0

    with instance_for_test() as instance, clickhouse.kept_open():
        monkeypatch.setenv("DAGSTER_HOME", instance.root_directory)
        assert main(["pause"]) == 0
        thread = threading.Thread(target=operator, args=(instance,))
        thread.start()
        result = _run(clickhouse, tenant, instance, days)
        thread.join(timeout=WAIT_SECONDS)
        lines = [text for _, text in _log(instance, result.run_id)]
    assert result.success and marks["run_id"] == result.run_id
    assert marks["done_while_paused"] == 0
    assert any(text.startswith("resumed (") for text in lines), lines
    assert _completed(clickhouse) == len(days)
