"""The Dagster pool atlas_insert, which caps INSERTs across every run, and its per-INSERT claims.

Each claim's step key ends in `@host:pid:start-ticks`, the process that claimed it, so that a
claim nobody will ever free (its process was killed, its run ended or is unknown) is freed by the
next claimant that waits and by the stale-load sweep, whether or not a daemon runs; a claim of a
run still STARTED whose process is gone also gets that run reported failed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter

from atlas_dagster.dagster_internals import (
    claim_pool_slot,
    free_pool_slot,
    pool_info,
    set_pool_limit,
    supports_pools,
)
from atlas_dagster.monitoring.workers import (
    Worker,
    WorkerState,
    current_worker,
    parse_worker,
    worker_state,
)
from atlas_dagster.resources.waits import BoundedWait, WaitLog, WaitTimeout
from atlas_dagster.settings import INSERT_HARD_CAP, parallel_inserts, slot_wait_seconds

INSERT_POOL = "atlas_insert"
CLAIM_POLL_SECONDS = 0.25
# How often a waiting claimant looks for claims of dead processes: two reads of the instance.
RECLAIM_SECONDS = 2.0
_WORKER_SEPARATOR = "@"
_PRIORITY_EPOCH = dt.date(2000, 1, 1)


class PoolLimitError(RuntimeError):
    """The pool cannot enforce the INSERT cap: missing instance support, or a limit above 4."""


class ClaimCanceled(RuntimeError):
    """The run was canceled while its INSERT waited for a slot."""


class SlotWaitTimeout(WaitTimeout):
    """An INSERT waited for a slot longer than ATLAS_SLOT_WAIT_SECONDS; the message names the
    runs and steps that held them."""


@dataclass(frozen=True)
class PoolClaim:
    """One claimed slot or pending claim of a pool, and the process that made it."""

    run_id: str
    step_key: str
    claimed: bool

    @property
    def worker(self) -> Worker | None:
        _, separator, worker = self.step_key.rpartition(_WORKER_SEPARATOR)
        return parse_worker(worker) if separator else None

    def describe(self, run: DagsterRun | None) -> str:
        status = run.status.value if run is not None else "unknown to this instance"
        worker = f", worker {self.worker}" if self.worker is not None else ""
        step = self.step_key.split(_WORKER_SEPARATOR)[0]
        return f"run {self.run_id} ({status}) step {step}{worker}"


def claims(instance: DagsterInstance, pool: str) -> list[PoolClaim]:
    """Claimed slots, then claims still pending (a claimed step keeps its pending row)."""
    info = pool_info(instance, pool)
    claimed = [PoolClaim(c.run_id, c.step_key, True) for c in info.claimed_slots]
    taken = {(c.run_id, c.step_key) for c in claimed}
    return claimed + [
        PoolClaim(p.run_id, p.step_key, False)
        for p in info.pending_steps
        if (p.run_id, p.step_key) not in taken
    ]


def _runs(instance: DagsterInstance, run_ids: set[str]) -> dict[str, DagsterRun]:
    if not run_ids:
        return {}
    records = instance.get_run_records(filters=RunsFilter(run_ids=sorted(run_ids)))
    return {record.dagster_run.run_id: record.dagster_run for record in records}


def _why_dead(claim: PoolClaim, run: DagsterRun | None, host: str) -> str | None:
    """Why nobody will ever free this claim, or None while its holder may still use it."""
    if run is None:
        return "its run is unknown to this Dagster instance"
    if run.is_finished:
        return f"its run ended ({run.status.value})"
    worker = claim.worker
    if worker is not None and worker_state(str(worker), host) in (
        WorkerState.GONE,
        WorkerState.REUSED,
    ):
        return f"its process (pid {worker.pid} on host {worker.host}) is gone"
    return None


def reclaim_dead_claims(
    instance: DagsterInstance, pool: str = INSERT_POOL, log: WaitLog | None = None
) -> list[str]:
    """Frees the pool's claims whose holder is dead; reports a STARTED run whose process is gone
    as failed (nothing else would: the run can never finish). Returns what was freed."""
    found = claims(instance, pool)
    runs = _runs(instance, {c.run_id for c in found})
    host = socket.gethostname()
    freed: list[str] = []
    for claim in found:
        run = runs.get(claim.run_id)
        why = _why_dead(claim, run, host)
        if why is None:
            continue
        free_pool_slot(instance, claim.run_id, claim.step_key)
        what = "a slot" if claim.claimed else "a pending claim"
        text = f"freed {what} of pool {pool} held by {claim.describe(run)}: {why}"
        freed.append(text)
        if log is not None:
            log.warning(text)
        if run is not None and run.status == DagsterRunStatus.STARTED:
            _fail_abandoned(instance, run.run_id, why)
    return freed


def _fail_abandoned(instance: DagsterInstance, run_id: str, why: str) -> None:
    run = instance.get_run_by_id(run_id)  # re-read: it may have ended meanwhile
    if run is not None and run.status == DagsterRunStatus.STARTED:
        instance.report_run_failed(
            run, f"atlas: this run held a slot of pool {INSERT_POOL} but {why}: it can never finish"
        )


def holders(instance: DagsterInstance, pool: str = INSERT_POOL) -> str:
    """Who holds the pool's slots, for a waiting claimant's report."""
    found = [c for c in claims(instance, pool) if c.claimed]
    runs = _runs(instance, {c.run_id for c in found})
    limit = pool_info(instance, pool).limit
    if not found:
        return f"pool {pool} (limit {limit}) has no claimed slot yet; the next one is assigned"
    named = "; ".join(c.describe(runs.get(c.run_id)) for c in found)
    return f"pool {pool} (limit {limit}) is held by {named}"


def day_priority(day: dt.date) -> int:
    """Newer days get higher priority, so contended slots go to the newest day first."""
    return day.toordinal() - _PRIORITY_EPOCH.toordinal()


def ensure_insert_pool(instance: DagsterInstance) -> int:
    """Seeds the pool from ATLAS_MAX_PARALLEL_INSERTS and returns its live limit (at most 4).

    An operator's own limit (`dagster instance concurrency set atlas_insert N`, or the UI) is kept
    when it is within the cap, so parallelism can be lowered live without a redeploy.
    """
    if not supports_pools(instance):
        raise PoolLimitError(
            "this Dagster instance cannot hold pool limits (an ephemeral instance?): set "
            "DAGSTER_HOME to a persistent instance so that the cap of "
            f"{INSERT_HARD_CAP} INSERTs in parallel is enforced across runs"
        )
    info = pool_info(instance, INSERT_POOL)
    if info.limit is not None and info.limit > INSERT_HARD_CAP:
        raise PoolLimitError(
            f"the Dagster pool {INSERT_POOL} allows {info.limit} concurrent INSERTs, above the "
            f"hard cap of {INSERT_HARD_CAP} (the backfill shares the cluster with real-time "
            f"ingestion); lower it with `dagster instance concurrency set {INSERT_POOL} "
            f"{parallel_inserts()}` or in the UI's Concurrency page"
        )
    if info.limit is None or info.using_default_limit or info.slot_count == 0:
        set_pool_limit(instance, INSERT_POOL, parallel_inserts())
        return parallel_inserts()
    return info.limit


@contextlib.contextmanager
def insert_slot(
    instance: DagsterInstance,
    run_id: str,
    slot_key: str,
    priority: int,
    canceled: threading.Event,
    log: WaitLog | None = None,
) -> Iterator[None]:
    """Holds one slot of the pool for one INSERT; waits its turn by priority, then creation, at
    most ATLAS_SLOT_WAIT_SECONDS, reporting who holds the slots and freeing dead holders' ones.

    A waiting claim shows as a pending step of the pool on the UI's Concurrency page."""
    step_key = f"{slot_key}{_WORKER_SEPARATOR}{current_worker()}"
    wait = BoundedWait(
        f"a slot of pool {INSERT_POOL} for {slot_key}", slot_wait_seconds(), log, SlotWaitTimeout
    )
    waited = False
    next_reclaim = time.monotonic()
    try:
        while True:
            # Checked before and after each claim, so a canceled run starts no new INSERT.
            if canceled.is_set():
                raise ClaimCanceled("the run was canceled before this INSERT took a slot")
            if claim_pool_slot(instance, INSERT_POOL, run_id, step_key, priority):
                break
            if time.monotonic() >= next_reclaim:
                reclaim_dead_claims(instance, INSERT_POOL, log)
                wait.still_waiting(holders(instance))
                next_reclaim = time.monotonic() + RECLAIM_SECONDS
                waited = True
            time.sleep(CLAIM_POLL_SECONDS)
        if waited:
            wait.done()
        if canceled.is_set():
            raise ClaimCanceled("the run was canceled before this INSERT started")
        yield
    finally:
        free_pool_slot(instance, run_id, step_key)
