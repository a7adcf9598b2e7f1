"""Test helpers for monitoring: backfill_log rows written as a loader would, workers, real runs."""

from __future__ import annotations

import datetime as dt
import socket
import subprocess
import time
from pathlib import Path

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, job, op

from atlas_dagster.core.workers import Worker, start_ticks
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import query_rows
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.tenants import Tenant

LOG_COLUMNS = (
    "organization_id",
    "brand_id",
    "domain",
    "partition_date",
    "status",
    "rows_loaded",
    "source_rows",
    "files",
    "bytes",
    "error_message",
    "s3_path",
    "query_id",
    "run_id",
    "attempt",
    "started_at",
    "updated_at",
    "worker",
)


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def log_entry(tenant: Tenant, domain: str, day: dt.date, status: str, **columns: object) -> dict:
    now = utc_now()
    return {
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "domain": domain,
        "partition_date": day,
        "status": status,
        "rows_loaded": 0,
        "source_rows": 0,
        "files": 2,
        "bytes": 1000,
        "error_message": "",
        "s3_path": f"{tenant.source}/{domain}/day={day}",
        "query_id": f"atlas-test-{domain}-{day}",
        "run_id": "",
        "attempt": 1,
        "started_at": now - dt.timedelta(seconds=5),
        "updated_at": now,
        "worker": "",
        **columns,
    }


def insert_log_rows(clickhouse: ClickHouseResource, entries: list[dict]) -> None:
    with clickhouse.session() as client:
        ensure_schema(client)
        client.insert(
            "atlas.backfill_log",
            [[entry[c] for c in LOG_COLUMNS] for entry in entries],
            column_names=list(LOG_COLUMNS),
        )


def log_rows(clickhouse: ClickHouseResource, tenant: Tenant) -> dict[tuple[str, dt.date], dict]:
    """The newest version of each of the tenant's days, keyed by (domain, day)."""
    with clickhouse.session() as client:
        rows = query_rows(
            client,
            "SELECT * FROM atlas.backfill_log FINAL WHERE organization_id = {o:String}",
            {"o": tenant.organization_id},
        )
    return {(row["domain"], row["partition_date"]): row for row in rows}


def dead_worker() -> Worker:
    """The identity of a real process of this host that has exited (and was reaped)."""
    process = subprocess.Popen(["cat"], stdin=subprocess.PIPE)
    ticks = start_ticks(process.pid)
    assert ticks is not None
    process.communicate()
    return Worker(socket.gethostname(), process.pid, ticks)


def wait_for_zombie(pid: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline, f"pid {pid} did not become a zombie"
        time.sleep(0.01)


@op
def _succeeds() -> None:
    pass


@op
def _fails() -> None:
    raise RuntimeError("the load's step failed")


@job
def succeeding_job() -> None:
    _succeeds()


@job
def failing_job() -> None:
    _fails()


def started_run(instance: DagsterInstance) -> DagsterRun:
    """A run record the instance holds as STARTED, as a run worker would have left it."""
    return instance.create_run_for_job(succeeding_job, status=DagsterRunStatus.STARTED)
