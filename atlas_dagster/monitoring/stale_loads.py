"""Stale loads: 'running' backfill_log days whose load is no longer happening, and marking them.

A day is stale when its Dagster run has finished or is unknown to the instance, or when the
worker that logged it ran on this host and that process is gone (or its pid was reused). Used
by the sweep and run-failure sensors, and read-only by `atlas-dagster status`.
"""

from __future__ import annotations

import datetime as dt
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field

from clickhouse_connect.driver.client import Client
from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter

from atlas_dagster import sql
from atlas_dagster.core.tags import WILL_RETRY_TAG
from atlas_dagster.core.workers import Worker, WorkerState, parse_worker, worker_state
from atlas_dagster.resources.connection import query_rows, run_command
from atlas_dagster.scope import EVERYTHING, Scope

_DEAD_WORKER = (WorkerState.GONE, WorkerState.REUSED)


@dataclass(frozen=True)
class RunningLoad:
    """One day whose newest backfill_log version says 'running'."""

    organization_id: str
    brand_id: str
    domain: str
    partition_date: dt.date
    run_id: str
    attempt: int
    worker: str
    s3_path: str
    started_at: dt.datetime
    updated_at: dt.datetime
    version: int  # updated_at in microseconds: the exact version that was judged

    @property
    def label(self) -> str:
        return f"{self.organization_id}.{self.brand_id} {self.domain} {self.partition_date}"

    def key(self) -> dict[str, object]:
        return {
            "organization_id": self.organization_id,
            "brand_id": self.brand_id,
            "domain": self.domain,
            "partition_date": self.partition_date,
        }


@dataclass(frozen=True)
class StaleLoad:
    load: RunningLoad
    reason: str
    # A STARTED run whose worker on this host is gone: Dagster's default launcher never notices.
    abandoned_run: DagsterRun | None = None


@dataclass(frozen=True)
class SweepResult:
    marked: list[StaleLoad] = field(default_factory=list)
    failed_runs: list[str] = field(default_factory=list)


def running_loads(client: Client, scope: Scope = EVERYTHING, run_id: str = "") -> list[RunningLoad]:
    parameters = {**scope.parameters(), "run_id": run_id}
    rows = query_rows(client, sql.query("stale_loads/running_loads"), parameters)
    return [RunningLoad(**row) for row in rows]


def runs_by_id(instance: DagsterInstance, run_ids: Iterable[str]) -> dict[str, DagsterRun]:
    wanted = sorted({r for r in run_ids if r})
    if not wanted:
        return {}
    records = instance.get_run_records(filters=RunsFilter(run_ids=wanted))
    return {record.dagster_run.run_id: record.dagster_run for record in records}


def _worker_fact(worker: Worker, state: WorkerState) -> str:
    if state is WorkerState.GONE:
        return f"worker pid {worker.pid} on host {worker.host} is gone"
    return f"worker pid {worker.pid} on host {worker.host} was reused by a newer process"


def _run_fact(run_id: str, run: DagsterRun | None) -> str:
    if run is None:
        return f"Dagster run {run_id or '(none)'} is unknown to this Dagster instance"
    return f"Dagster run {run_id} is {run.status.value}"


def judge(
    load: RunningLoad, runs: dict[str, DagsterRun] | None, host: str | None = None
) -> StaleLoad | None:
    """None while the load may still be happening; `runs` None means no instance to ask."""
    state = worker_state(load.worker, host)
    worker = parse_worker(load.worker)
    worker_dead = worker is not None and state in _DEAD_WORKER
    run = runs.get(load.run_id) if runs is not None else None
    run_over = runs is not None and (run is None or run.is_finished)
    if not (worker_dead or run_over):
        return None
    facts = [_worker_fact(worker, state)] if worker is not None and worker_dead else []
    if runs is not None:
        facts.append(_run_fact(load.run_id, run))
    reason = f"stale: {'; '.join(facts)}; the load stopped without logging its result"
    started = run is not None and run.status == DagsterRunStatus.STARTED
    abandoned = run if worker_dead and started else None
    return StaleLoad(load, reason, abandoned)


def find_stale(
    loads: list[RunningLoad], instance: DagsterInstance | None, host: str | None = None
) -> list[StaleLoad]:
    runs = None if instance is None else runs_by_id(instance, (load.run_id for load in loads))
    host = host or socket.gethostname()
    return [stale for load in loads if (stale := judge(load, runs, host)) is not None]


def mark_failed(client: Client, load: RunningLoad, reason: str) -> bool:
    """Writes the 'failed' version unless the day moved on; True when that version is ours."""
    parameters = {**load.key(), "version": load.version, "error_message": reason}
    run_command(client, sql.query("stale_loads/mark_failed"), parameters)
    [current] = query_rows(client, sql.query("stale_loads/current_state"), load.key())
    return current["status"] == "failed" and current["error_message"] == reason


def fail_abandoned_runs(instance: DagsterInstance, stale: list[StaleLoad]) -> list[str]:
    """Reports STARTED runs whose worker died as failed, so the UI stops showing them running."""
    failed: list[str] = []
    for item in stale:
        if item.abandoned_run is None or item.abandoned_run.run_id in failed:
            continue
        # Re-read: the run may have ended since it was judged.
        run = instance.get_run_by_id(item.abandoned_run.run_id)
        if run is None or run.status != DagsterRunStatus.STARTED:
            continue
        announce_retry(instance, run)
        worker = parse_worker(item.load.worker)
        instance.report_run_failed(
            run,
            f"atlas stale-load sweep: the process loading {item.load.label} "
            f"(pid {worker.pid if worker else '?'} on host {worker.host if worker else '?'}) "
            "is gone, so this run can never finish",
        )
        failed.append(run.run_id)
    return failed


def announce_retry(instance: DagsterInstance, run: DagsterRun) -> None:
    """Tags a run about to be failed as one Dagster will retry, when its retries allow it.

    Dagster writes that decision only after the failure is stored (dagster#34204): a backfill
    daemon tick in between would find the backfill's last run failed, no retry announced, and
    end it COMPLETED_FAILED, after which Dagster retries none of its runs. Dagster's own
    decision, written right after the failure, replaces this one."""
    if not instance.run_retries_enabled:
        return
    group = instance.get_run_group(run.run_id)
    retries_so_far = len(group[1]) - 1 if group is not None else 0
    if retries_so_far < instance.run_retries_max_retries:
        instance.add_run_tags(run.run_id, {WILL_RETRY_TAG: "true"})


def sweep(
    client: Client, instance: DagsterInstance, scope: Scope = EVERYTHING, host: str | None = None
) -> SweepResult:
    """Marks every stale day failed; abandoned runs are failed first, so a retry finds them."""
    stale = find_stale(running_loads(client, scope), instance, host)
    failed_runs = fail_abandoned_runs(instance, stale)
    marked = [item for item in stale if mark_failed(client, item.load, item.reason)]
    return SweepResult(marked, failed_runs)


def fail_loads_of_run(client: Client, run: DagsterRun) -> list[StaleLoad]:
    """A run that failed or was canceled loads nothing more: its 'running' days failed."""
    stale = [
        StaleLoad(load, _ended_run_reason(run, load))
        for load in running_loads(client, run_id=run.run_id)
    ]
    return [item for item in stale if mark_failed(client, item.load, item.reason)]


def _ended_run_reason(run: DagsterRun, load: RunningLoad) -> str:
    worker = parse_worker(load.worker)
    # The worker named too: this path and the sweep's race for a killed run, and an operator
    # looking for the process should not depend on which one wrote first.
    where = f" (worker pid {worker.pid} on host {worker.host})" if worker is not None else ""
    return (
        f"stale: Dagster run {run.run_id}{where} ended with status {run.status.value} while "
        "this day was still 'running'; the load stopped without logging its result"
    )
