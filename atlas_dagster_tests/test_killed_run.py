"""A run killed in the middle of an INSERT: its 'running' day becomes 'failed' within one sweep
interval of the stale-load sensor on a real Dagster daemon, and its run is reported failed."""

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
from atlas_dagster_tests.bulk_exports import write_bulk_day
from atlas_dagster_tests.dagster_stack import run_dagster_dev, write_tenants

pytestmark = pytest.mark.e2e

DAY = dt.date(2026, 11, 5)
ROWS = 3_000_000  # an INSERT of a few seconds, long enough to be killed in the middle
SWEEP_SECONDS = 5
# The sensor ticks every SWEEP_SECONDS; the daemon evaluates due sensors every few seconds.
WITHIN_SECONDS = SWEEP_SECONDS + 10


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


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _wait_for_cpu(pid: int, seconds: float, deadline: float) -> None:
    start = _cpu_seconds(pid)
    while _cpu_seconds(pid) - start < seconds:
        assert time.monotonic() < deadline, f"worker {pid} used no CPU"
        time.sleep(0.05)


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
    deadline = time.monotonic() + 240
    with DagsterInstance.from_config(str(stack.home)) as instance:
        pid = None
        while pid is None:
            assert time.monotonic() < deadline, stack.log_tail()
            runs = instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
            pid = _insert_started(instance, runs[0].run_id) if runs else None
            time.sleep(0.2)
        run_id = runs[0].run_id
        # The day takes the engine and logs 'running', then its INSERT runs: wait for the worker
        # to spend CPU, not wall time (a fixed 1.5 s sleep killed it before 'running' under load).
        _wait_for_cpu(pid, seconds=1.0, deadline=deadline)
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()

        first_seen = _log_row(stack)
        row = first_seen
        while row.get("status") != "failed":
            assert time.monotonic() - killed_at < WITHIN_SECONDS, (row, stack.log_tail())
            time.sleep(0.5)
            row = _log_row(stack)
        marked_after = time.monotonic() - killed_at
        run = instance.get_run_by_id(run_id)

    assert first_seen["status"] in ("running", "failed")  # 'failed' if the sweep was quicker
    assert row["run_id"] == run_id
    assert "stale" in row["error_message"] and str(pid) in row["error_message"], row
    print(f"first seen {first_seen['status']}, failed {marked_after:.1f}s after the kill")
    assert marked_after <= WITHIN_SECONDS
    assert run.status.value == "FAILURE"  # the sweep reports the dead worker's run as failed
