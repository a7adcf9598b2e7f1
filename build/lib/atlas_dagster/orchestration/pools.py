"""The Dagster pool atlas_insert, which caps INSERTs across every run, and its per-INSERT claims."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections.abc import Iterator

from dagster import DagsterInstance

from atlas_dagster.dagster_internals import (
    claim_pool_slot,
    free_pool_slot,
    pool_info,
    set_pool_limit,
    supports_pools,
)
from atlas_dagster.settings import INSERT_HARD_CAP, parallel_inserts

INSERT_POOL = "atlas_insert"
CLAIM_POLL_SECONDS = 0.25
_PRIORITY_EPOCH = dt.date(2000, 1, 1)


class PoolLimitError(RuntimeError):
    """The pool cannot enforce the INSERT cap: missing instance support, or a limit above 4."""


class ClaimCanceled(RuntimeError):
    """The run was canceled while its INSERT waited for a slot."""


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
) -> Iterator[None]:
    """Holds one slot of the pool for one INSERT; waits its turn by priority, then creation.

    A waiting claim shows as a pending step of the pool on the UI's Concurrency page."""
    try:
        while True:
            # Checked before and after each claim, so a canceled run starts no new INSERT.
            if canceled.is_set():
                raise ClaimCanceled("the run was canceled before this INSERT took a slot")
            if claim_pool_slot(instance, INSERT_POOL, run_id, slot_key, priority):
                break
            time.sleep(CLAIM_POLL_SECONDS)
        if canceled.is_set():
            raise ClaimCanceled("the run was canceled before this INSERT started")
        yield
    finally:
        free_pool_slot(instance, run_id, slot_key)
