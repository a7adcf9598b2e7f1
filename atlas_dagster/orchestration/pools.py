"""The Dagster pool atlas_insert, which caps INSERTs across every run, and its per-INSERT claims.

Each claim's step key ends in `@host:pid:start-ticks`, the process that claimed it, so that a
claim nobody will ever free (its process was killed, its run ended or is unknown) is freed by the
next claimant that waits and by the stale-load sweep, whether or not a daemon runs; a claim of a
run still STARTED whose process is gone also gets that run reported failed.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter

from atlas_dagster.core.waits import BoundedWait, ClaimCanceled, WaitLog, WaitTimeout
from atlas_dagster.core.workers import (
    Worker,
    WorkerState,
    current_worker,
    parse_worker,
    worker_state,
)
from atlas_dagster.dagster_internals import (
    claim_pool_slot,
    free_pool_slot,
    pool_info,
)
from atlas_dagster.settings import SLOT_WAIT_SECONDS

INSERT_POOL = "atlas_insert"
CLAIM_POLL_SECONDS = 0.25
# How often a waiting claimant looks for claims of dead processes: two reads of the instance.
RECLAIM_SECONDS = 2.0
_WORKER_SEPARATOR = "@"
STOPPED = (
    f"pool {INSERT_POOL} is set to 0: INSERTs are stopped until an operator raises it "
    f"(`dagster instance concurrency set {INSERT_POOL} N`, or the UI's Concurrency page)"
)


class SlotWaitTimeout(WaitTimeout):
    """An INSERT waited for a slot longer than its bound (ATLAS_SLOT_WAIT_SECONDS); the message
    names the runs and steps that held them."""


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
    if limit == 0:
        return STOPPED
    if not found:
        return f"pool {pool} (limit {limit}) has no claimed slot yet; the next one is assigned"
    named = "; ".join(c.describe(runs.get(c.run_id)) for c in found)
    return f"pool {pool} (limit {limit}) is held by {named}"


def _claim(
    instance: DagsterInstance,
    run_id: str,
    step_key: str,
    what: str,
    priority: int,
    canceled: threading.Event,
    log: WaitLog | None,
    wait_seconds: float,
    clock: Callable[[], float],
    sleep: Callable[[float], object],
) -> None:
    """Claims one slot under `step_key`; waits its turn by priority, then creation, at most
    `wait_seconds` (ATLAS_SLOT_WAIT_SECONDS), reporting who holds the slots and freeing dead
    holders' ones. A claim that gives up (canceled, timed out, failed) is withdrawn. Between two
    tries it calls `sleep(CLAIM_POLL_SECONDS)`; `clock` times the wait (InsertSlots passes both)."""
    wait = BoundedWait(
        f"a slot of pool {INSERT_POOL} for {what}",
        wait_seconds,
        log,
        SlotWaitTimeout,
        clock,
    )
    waited = False
    next_reclaim = clock()
    try:
        while True:
            # Checked before and after each claim, so a canceled run starts no new INSERT.
            if canceled.is_set():
                raise ClaimCanceled("the run was canceled before this INSERT took a slot")
            if claim_pool_slot(instance, INSERT_POOL, run_id, step_key, priority):
                break
            if clock() >= next_reclaim:
                reclaim_dead_claims(instance, INSERT_POOL, log)
                wait.still_waiting(holders(instance))
                next_reclaim = clock() + RECLAIM_SECONDS
                waited = True
            sleep(CLAIM_POLL_SECONDS)
        if waited:
            wait.done()
        if canceled.is_set():
            raise ClaimCanceled("the run was canceled before this INSERT started")
    except BaseException:
        free_pool_slot(instance, run_id, step_key)
        raise


def slot_wanted_back(instance: DagsterInstance, pool: str = INSERT_POOL) -> bool:
    """Whether a slot held between INSERTs must go back to the pool: a claim waits for one, or an
    operator lowered the limit below the slots claimed (0: stopped). Three reads, no write."""
    info = pool_info(instance, pool)
    if info.limit is not None and len(info.claimed_slots) > info.limit:
        return True
    return any(p.assigned_timestamp is None for p in info.pending_steps)


# How stale a run's answer to "must a kept slot go back?" (a claim waits, or the limit was
# lowered) may be. Read after every INSERT it took 12 % of the GIL-holding samples of a 240-day
# small load (py-spy --gil: 104 of 831, three instance reads each); read at most twice a second,
# a claim of another run (or an operator's stop) waits at most this much longer for a slot this
# run keeps.
WAITING_READ_SECONDS = 0.5


class InsertSlots:
    """The slots of the pool one run holds, each kept from one of its INSERTs to the next while
    no other claim waits for a slot and the pool's limit still covers it, instead of claimed and
    freed for every INSERT.

    A claim and its free cost about ten instance transactions (SQLite writes for a local
    instance): measured 69 ms of Python a 5k-row tenant-day, on the 2 cores the engine needs.
    The cap is unchanged (a kept slot is a claimed slot). A slot is kept only while the run still
    has days to dispatch and, at the pool's last read (at most WAITING_READ_SECONDS ago), no claim
    waited and the claimed slots were within the limit (an operator's lower limit, or 0 to stop,
    takes effect at the end of each INSERT in flight): otherwise it is freed at the end of its
    INSERT, exactly as a per-INSERT claim would be, so that the pool's queue (priority, then
    creation) gives it to the newest waiting day of any run. Kept slots carry this process's
    worker in their step key like every claim, so a killed process's slots are freed as dead
    (`reclaim_dead_claims`); `release()` frees the idle ones when the run's loads end.
    """

    def __init__(
        self,
        instance: DagsterInstance,
        run_id: str,
        step: str,
        more_to_come: Callable[[], bool],
        log: WaitLog | None = None,
        wait_seconds: float = SLOT_WAIT_SECONDS.default,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.instance = instance
        self.run_id = run_id
        self.step = step
        self.more_to_come = more_to_come
        self.log = log
        self.wait_seconds = wait_seconds  # the longest a new claim waits (ATLAS_SLOT_WAIT_SECONDS)
        # What times the slot waits and the waiting-claims reads, and what a claim waiting for
        # its turn calls between two tries: a test drives both (a fake clock, a sleep that says
        # the claim is waiting) to prove the bounds without spending them.
        self.clock = clock
        self.sleep = sleep
        self._lock = threading.Lock()
        self._idle: list[str] = []
        self._claimed = 0
        self._wanted_seen: tuple[float, bool] | None = None  # (clock, slot_wanted_back)

    def _new_step_key(self) -> str:
        with self._lock:
            self._claimed += 1
            number = self._claimed
        return f"{self.step}[insert slot {number}]{_WORKER_SEPARATOR}{current_worker()}"

    @contextlib.contextmanager
    def slot(self, what: str, priority: int, canceled: threading.Event) -> Iterator[None]:
        """Holds a slot for the INSERT of `what`: a kept one if the run has one idle, else a new
        claim waiting its turn (named after `what` in the wait's reports; see `_claim`). A waiting
        claim shows as a pending step of the pool on the UI's Concurrency page."""
        with self._lock:
            step_key = self._idle.pop() if self._idle else None
        if step_key is None:
            step_key = self._new_step_key()
            _claim(
                self.instance,
                self.run_id,
                step_key,
                what,
                priority,
                canceled,
                self.log,
                self.wait_seconds,
                self.clock,
                self.sleep,
            )
        keep = False
        try:
            if canceled.is_set():
                raise ClaimCanceled("the run was canceled before this INSERT started")
            yield
            keep = self.more_to_come() and not self._slot_wanted_back()
        finally:
            if keep:
                with self._lock:
                    self._idle.append(step_key)
            else:
                free_pool_slot(self.instance, self.run_id, step_key)

    def _slot_wanted_back(self) -> bool:
        """`slot_wanted_back`, read at most every WAITING_READ_SECONDS by the run's threads."""
        now = self.clock()
        with self._lock:
            seen = self._wanted_seen
            if seen is not None and now - seen[0] < WAITING_READ_SECONDS:
                return seen[1]
        wanted = slot_wanted_back(self.instance)
        with self._lock:
            self._wanted_seen = (now, wanted)
        return wanted

    def release(self) -> None:
        """Frees the slots kept idle (the run has no more INSERTs to start)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for step_key in idle:
            free_pool_slot(self.instance, self.run_id, step_key)
