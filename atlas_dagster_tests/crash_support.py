"""Test and bench helpers of the crash tests: a tenant's bulk window, the stack killed for real
(every process of it, SIGKILL), and what backfill_log and the raw tables hold afterwards."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance, RunsFilter

from atlas_dagster.core.tags import BACKFILL_ID_TAG
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import Tenant
from atlas_dagster_tests.bulk_exports import ensure_bulk_day


def days_of(first: dt.date, last: dt.date) -> list[dt.date]:
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def write_window(tenant: Tenant, domains: list[str], days: list[dt.date], rows: int) -> None:
    for day in days:
        for domain in domains:
            ensure_bulk_day(tenant, domain, day, rows)


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            # The parent pid is the 2nd field after the command, which may hold spaces.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def process_tree(root: int) -> list[int]:
    """The root and all its descendants alive now."""
    children, found, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def kill_everything(root: int) -> list[int]:
    """SIGKILL to the root's process group and to every descendant (a run worker may sit in
    another group): nothing of the stack gets to clean up. Returns the pids killed."""
    pids = process_tree(root)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(root, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids):
        assert time.monotonic() < deadline, [p for p in pids if _alive(p)]
        time.sleep(0.05)
    return pids


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def materialized_count(instance: DagsterInstance, backfill_id: str) -> int:
    runs = instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
    return sum(
        len(instance.all_logs(r.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION))
        for r in runs
    )


def wait_until(what: Callable[[], bool], timeout: float, explain: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, explain()
        time.sleep(0.2)


def log_states(dsn: str, organization_id: str) -> dict[tuple[str, dt.date], dict]:
    """Each (domain, day) of the tenant as backfill_log holds it now (FINAL)."""
    clickhouse = ClickHouseResource(dsn=dsn, lock_wait_seconds=60)
    with clickhouse.session() as client:
        result = client.query(
            "SELECT domain, partition_date, status, attempt, run_id, rows_loaded "
            "FROM atlas.backfill_log FINAL WHERE organization_id = {org:String}",
            parameters={"org": organization_id},
        )
    return {
        (r[0], r[1]): dict(zip(result.column_names, r, strict=True)) for r in result.result_rows
    }


def raw_counts(
    dsn: str, organization_id: str, domains: list[str]
) -> dict[tuple[str, dt.date], int]:
    """Rows per (domain, day) in the raw tables, without FINAL: a day loaded twice shows twice."""
    clickhouse = ClickHouseResource(dsn=dsn, lock_wait_seconds=60)
    counts: dict[tuple[str, dt.date], int] = {}
    with clickhouse.session() as client:
        for domain in domains:
            result = client.query(
                f"SELECT event_date, count() FROM atlas.tbt_raw_events_{domain} "
                "WHERE organization_id = {org:String} GROUP BY event_date",
                parameters={"org": organization_id},
            )
            counts |= {(domain, day): int(n) for day, n in result.result_rows}
    return counts
