"""A run killed in the middle of an INSERT: its 'running' day becomes 'failed' at the latest by
the first sweep of the stale-load sensor after the kill, on a real Dagster daemon (the run's own
failure report, through the failed-runs sensor, may mark it first), and its run is reported
failed."""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance
from dagster._core.storage.dagster_run import RunsFilter

from atlas_dagster.cli.dagster_api import DagsterApi
from atlas_dagster.cli.dagster_dev import DagsterStack
from atlas_dagster.core.tags import BACKFILL_ID_TAG
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import load_tenants
from atlas_dagster_tests.faults_support import wait_for_table_part
from testkit.bulk_exports import write_bulk_day
from testkit.dagster_stack import run_dagster_dev, write_tenants

pytestmark = pytest.mark.e2e

DAY = dt.date(2026, 11, 5)
ROWS = 3_000_000  # an INSERT of a few seconds, long enough to be killed in the middle
SWEEP_SECONDS = 5
SWEEP_SENSOR = "backfill_log_stale_sweep"
# Bounds of the waits for the daemon (a few sweeps on an idle machine): against a hang, never a
# measure of speed. "Within one sweep" is read from the sensor's ticks instead.
WAIT_SECONDS = 240


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("killed")
    tenants_file = write_tenants(
        work / "tenants.yaml",
        [
            {
                "organization_id": "killed",
                "brand_id": "main",
                "source": f"file://{work / 'exports'}",
                "start_date": DAY.isoformat(),
                "end_date": DAY.isoformat(),
                "domains": ["casino"],
            }
        ],
    )
    [tenant] = load_tenants(tenants_file)
    write_bulk_day(tenant, "casino", DAY, ROWS)
    env = {"ATLAS_STALE_SWEEP_SECONDS": str(SWEEP_SECONDS)}
    with run_dagster_dev(work, tenants_file, env) as running:
        yield running


def _insert_started(instance: DagsterInstance, run_id: str) -> int | None:
    """The worker pid the run logged when its INSERT started."""
    for entry in instance.all_logs(run_id):
        match = re.search(r"INSERT started: .* \(worker [^:]+:(\d+):\d+\)", entry.user_message)
        if match:
            return int(match.group(1))
    return None


def _sweeps(instance: DagsterInstance, after: float) -> list:
    """The stale-load sensor's finished ticks that ended after `after` (a wall time), by start,
    leaving out those that skipped because the engine was busy (the next tick sweeps)."""
    for state in instance.all_instigator_state():
        if state.instigator_name == SWEEP_SENSOR:
            ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id)
            return sorted(
                (
                    t
                    for t in ticks
                    if t.is_completed
                    and t.end_timestamp is not None
                    and t.end_timestamp >= after
                    and "retrying on the next tick" not in (t.skip_reason or "")
                ),
                key=lambda t: t.timestamp,
            )
    return []


def _log_row(stack: DagsterStack) -> dict:
    clickhouse = ClickHouseResource(dsn=stack.env["ATLAS_CLICKHOUSE_DSN"], lock_wait_seconds=60)
    with clickhouse.session() as client:
        result = client.query(
            "SELECT status, error_message, run_id FROM atlas.backfill_log FINAL "
            "WHERE organization_id = 'killed' AND partition_date = {day:Date}",
            parameters={"day": DAY},
        )
        rows = [dict(zip(result.column_names, r, strict=True)) for r in result.result_rows]
    return rows[0] if rows else {}


def test_a_killed_runs_running_day_is_marked_failed_by_the_sweep(stack: DagsterStack) -> None:
    api = DagsterApi(stack.url)
    backfill_id = api.launch_backfill(
        {"tbt_raw_events_casino": [(f"{DAY}|killed.main", f"{DAY}|killed.main")]}, "kill me", {}
    )
    deadline = time.monotonic() + WAIT_SECONDS
    with DagsterInstance.from_config(str(stack.home)) as instance:
        pid = None
        while pid is None:
            assert time.monotonic() < deadline, stack.log_tail()
            runs = instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
            pid = _insert_started(instance, runs[0].run_id) if runs else None
            time.sleep(0.2)
        run_id = runs[0].run_id
        # The day takes the engine and logs 'running', then its INSERT writes the raw table: a
        # part on disk (was: 1 s of the worker's CPU, and before that a fixed 1.5 s sleep, which
        # killed it before 'running' under load).
        wait_for_table_part(
            Path(stack.env["ATLAS_CLICKHOUSE_DSN"][len("chdb://") :]),
            "tbt_raw_events_casino",
            lambda: Path(f"/proc/{pid}").exists(),
            stack.log_tail,
            timeout=max(1.0, deadline - time.monotonic()),
        )
        killed_at = time.time()
        os.kill(pid, signal.SIGKILL)

        first_seen = _log_row(stack)
        row = first_seen
        while row.get("status") != "failed":
            assert time.monotonic() < deadline, (row, stack.log_tail())
            time.sleep(0.5)
            row = _log_row(stack)
        # Until the first sweep that started after the kill has finished: it read the day after
        # the kill (a sweep waiting for the engine then reads it at once too).
        sweeps = _sweeps(instance, killed_at)
        while not any(t.timestamp >= killed_at for t in sweeps):
            assert time.monotonic() < deadline, stack.log_tail()
            time.sleep(0.5)
            sweeps = _sweeps(instance, killed_at)
        run = instance.get_run_by_id(run_id)

    assert first_seen["status"] in ("running", "failed")  # 'failed' if a sensor was quicker
    assert row["run_id"] == run_id
    assert "stale" in row["error_message"] and str(pid) in row["error_message"], row
    # Within one sweep: failed by the end of the first sweep after the kill. Either a sweep up to
    # that one marked it, or that one found nothing left (a day still 'running' with its worker
    # gone is marked by any sweep that reads it), the failed-runs sensor having marked it first.
    first = next(t for t in sweeps if t.timestamp >= killed_at)
    marking = [t for t in sweeps if "marked 1 day(s) failed" in (t.skip_reason or "")]
    for tick in sweeps:
        started, ended = tick.timestamp - killed_at, tick.end_timestamp - killed_at
        print(f"sweep {started:+.1f}s..{ended:+.1f}s: {tick.skip_reason}")
    print(f"first seen {first_seen['status']}; {row['error_message']}")
    if marking:
        assert marking[0].timestamp <= first.timestamp, (marking[0], first)
    else:
        assert first.skip_reason == "no stale loads", first
        assert "ended with status FAILURE" in row["error_message"], row
    assert run.status.value == "FAILURE"  # reported failed: its worker is gone
