"""How many INSERTs may run at once, in one place: the hard cap, the operator's live pool limit
and a run's own share under the service's pushback and the operator's pause.

Invariants: the pool atlas_insert never allows more than settings.INSERT_HARD_CAP (a pool set
above it is refused when a run starts); ATLAS_MAX_PARALLEL_INSERTS seeds the pool only while
nobody has set it, so an operator's limit, 0 ("stop") included, is never undone by a run; a run
starts at most min(the pool's live limit, its backpressure limit) INSERTs at once, re-reading
the pool from its own thread at most every POOL_READ_SECONDS, so that an operator's raise widens
a running backfill and a lowering narrows it; every time-left figure counts at most
`live_limit()` loads at once. The claims that enforce the pool across runs are pools.py's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dagster import DagsterInstance

from atlas_dagster.core.waits import PoolLimitError, WaitLog
from atlas_dagster.dagster_internals import pool_info, set_pool_limit, supports_pools
from atlas_dagster.orchestration.backpressure import Backpressure
from atlas_dagster.orchestration.pools import INSERT_POOL, STOPPED
from atlas_dagster.settings import INSERT_HARD_CAP, PARALLEL_INSERTS

# How stale a run's view of the pool's limit may be: one instance read (a few ms on SQLite),
# from the run's reporting thread, never under the scheduler's lock.
POOL_READ_SECONDS = 5.0


def pool_limit(instance: DagsterInstance) -> int | None:
    """The limit an operator (or a run's seeding) set on the pool; None while it has none."""
    info = pool_info(instance, INSERT_POOL)
    if info.limit is None or info.using_default_limit:
        return None
    return int(info.limit)


def live_limit(instance: DagsterInstance | None, configured: int) -> int:
    """How many loads may run at once now: the pool's limit (0: stopped), else `configured`
    (ATLAS_MAX_PARALLEL_INSERTS, which seeds it), never above the hard cap. Without an instance
    (a CLI run with no DAGSTER_HOME), `configured`."""
    limit = pool_limit(instance) if instance is not None and supports_pools(instance) else None
    return min(INSERT_HARD_CAP, configured if limit is None else limit)


def seed_pool(instance: DagsterInstance, configured: int = PARALLEL_INSERTS.default) -> int:
    """Seeds the pool with `configured` (ATLAS_MAX_PARALLEL_INSERTS) unless an operator set its
    limit, and returns the live limit (0: stopped). Refuses an instance that cannot hold pools
    (an ephemeral one: the cap would not hold across runs) and a pool above the hard cap."""
    if not supports_pools(instance):
        raise PoolLimitError(
            "this Dagster instance cannot hold pool limits (an ephemeral instance?): set "
            "DAGSTER_HOME to a persistent instance so that the cap of "
            f"{INSERT_HARD_CAP} INSERTs in parallel is enforced across runs"
        )
    info = pool_info(instance, INSERT_POOL)  # a default limit (dagster.yaml's) counts here too
    if info.limit is not None and info.limit > INSERT_HARD_CAP:
        raise PoolLimitError(
            f"the Dagster pool {INSERT_POOL} allows {info.limit} concurrent INSERTs, above the "
            f"hard cap of {INSERT_HARD_CAP} (the backfill shares the cluster with real-time "
            f"ingestion); lower it with `dagster instance concurrency set {INSERT_POOL} "
            f"{configured}` or in the UI's Concurrency page"
        )
    limit = pool_limit(instance)
    if limit is None:
        set_pool_limit(instance, INSERT_POOL, configured)
        return configured
    return limit


class InsertLimit:
    """One run's INSERT limit: the pool's live limit (read by `refresh`), lowered by the run's
    backpressure and paused by its pause flags (`pressure`). `capacity()` is what the scheduler
    reads under its lock before each dispatch: no I/O.

    A stopped pool (0) keeps the run's capacity as it was: its next INSERTs wait for a slot in
    pools.py's claims, which report the stop and end at ATLAS_SLOT_WAIT_SECONDS, so that the
    wait is bounded and seen where every slot wait is.
    """

    width = INSERT_HARD_CAP  # the most a run ever has in flight: its worker threads

    def __init__(
        self,
        instance: DagsterInstance,
        pressure: Backpressure,
        pool: int,
        log: WaitLog,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.instance = instance
        self.pressure = pressure
        self.pool = pool  # the pool's limit at the last read (0: stopped)
        self.log = log
        self.clock = clock
        self._read_at = clock()

    @classmethod
    def start(
        cls,
        instance: DagsterInstance,
        configured: int,
        make_pressure: Callable[[int], Backpressure],
        log: WaitLog,
    ) -> InsertLimit:
        """The pool seeded (`seed_pool`), the run's backpressure made at its width: the pool's
        limit, or `configured` while the pool is stopped, so that it resumes at full width."""
        pool = seed_pool(instance, configured)
        limit = cls(instance, make_pressure(pool or configured), pool, log)
        if pool == 0:
            log.warning(STOPPED)
        return limit

    def capacity(self) -> int:
        """INSERTs the run may have in flight now (0 while paused); no I/O."""
        return self.pressure.capacity()

    def live(self) -> int:
        """The pool's limit as last read: what time-left figures count at once."""
        return self.pool

    def refresh(self, force: bool = False) -> None:
        """Re-reads the pool's limit when due; a change moves the backpressure's cap with it
        (a raise widens the run at once unless the service is pushing back)."""
        now = self.clock()
        if not force and now - self._read_at < POOL_READ_SECONDS:
            return
        self._read_at = now
        pool = pool_limit(self.instance)
        if pool is None or pool == self.pool:
            return
        was, self.pool = self.pool, min(pool, INSERT_HARD_CAP)
        if self.pool == 0:
            self.log.warning(STOPPED)
            return
        self.pressure.set_cap(self.pool, f"the operator set pool {INSERT_POOL} {was} -> {pool}")
