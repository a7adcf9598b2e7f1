"""Server mode's exclusion per tenant-day-domain: one clear → INSERT → count at a time, across
processes and hosts, held where every process of the deployment already meets (the Dagster
instance's storage), and freed by the death of its holder without anyone's help.

- Instance storage in PostgreSQL (production: shared by every host): a session-level advisory
  lock on a dedicated connection, keyed by a 64-bit digest of the tenant-day-domain. PostgreSQL
  drops it when the holder's connection ends, however the holder died; waiters name the holder
  from pg_stat_activity (its application_name carries worker and run).
- Any other instance storage (SQLite: one host by construction): a file lock in the instance's
  directory, among LOCK_BUCKETS files (a digest of the key picks one), freed by the kernel when
  the holder dies; the holder's identity is written into it. Without an instance (a load called
  outside Dagster) the same, in the system's temporary directory: this host only.

Embedded mode needs none of this across processes: the engine's own file lock already lets one
process at a time write. Within that process the run's threads load side by side on the one
engine (resources/embedded_engine.py), so they exclude each other with in-process locks
(`in_process_day_exclusion`). Every wait is bounded and reported like the others
(core/waits.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from dagster import DagsterInstance
from sqlalchemy import text

from atlas_dagster.core.waits import BoundedWait, WaitLog, WaitTimeout
from atlas_dagster.core.workers import current_worker
from atlas_dagster.dagster_internals import instance_database_connection
from atlas_dagster.resources.embedded_engine import acquire_lock_file, release_file_lock

# 4 INSERTs at most in flight: two unrelated days share a file with probability ~6/1024, and
# then only take turns; one file per day would leave a file per day ever loaded.
LOCK_BUCKETS = 1024
POLL_SECONDS = 0.5
_HOLDER_SQL = """
SELECT a.application_name, a.client_addr, a.backend_start
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted
  AND l.classid = :classid AND l.objid = :objid AND l.objsubid = 1
"""


class DayBusyError(WaitTimeout):
    """Another load of the same tenant-day-domain held it longer than the bounded wait."""


# Embedded mode, one per bucket of keys (as the lock files): a collision only makes two days of
# the same process take turns.
_IN_PROCESS = [threading.Lock() for _ in range(LOCK_BUCKETS)]


def day_key(tenant_key: str, domain: str, day: dt.date) -> str:
    return f"{tenant_key}|{domain}|{day.isoformat()}"


def _digest(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


def _lock_dir(instance: DagsterInstance | None) -> Path:
    base = Path(instance.root_directory if instance is not None else tempfile.gettempdir())
    return base / "atlas_day_locks"


@contextlib.contextmanager
def day_exclusion(
    instance: DagsterInstance | None,
    key: str,
    wait_seconds: float,
    log: WaitLog | None = None,
    run_id: str = "",
) -> Iterator[None]:
    """Holds the tenant-day-domain `key` (see day_key) for the body of the `with`."""
    what = f"the load of {key} (another process is loading that day)"
    with (
        instance_database_connection(instance) if instance is not None else contextlib.nullcontext()
    ) as connection:
        if connection is not None and connection.dialect.name == "postgresql":
            with _advisory_lock(connection, key, what, wait_seconds, log, run_id):
                yield
            return
    lock_file = _lock_dir(instance) / f"{_digest(key) % LOCK_BUCKETS:04d}.lock"
    handle = acquire_lock_file(lock_file, what, wait_seconds, log, run_id, error=DayBusyError)
    try:
        yield
    finally:
        release_file_lock(handle)


@contextlib.contextmanager
def in_process_day_exclusion(
    key: str, wait_seconds: float, log: WaitLog | None = None
) -> Iterator[None]:
    """Holds `key` against the other threads of this process (embedded mode)."""
    lock = _IN_PROCESS[_digest(key) % LOCK_BUCKETS]
    if not lock.acquire(blocking=False):
        wait = BoundedWait(
            f"the load of {key} (another thread of this process is loading that day)",
            wait_seconds,
            log,
            DayBusyError,
        )
        while not lock.acquire(timeout=POLL_SECONDS):
            wait.still_waiting(f"held by another thread of worker {current_worker()}")
        wait.done()
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def _advisory_lock(
    connection, key: str, what: str, wait_seconds: float, log: WaitLog | None, run_id: str
) -> Iterator[None]:
    lock_id = _digest(key)
    connection = connection.execution_options(isolation_level="AUTOCOMMIT")
    name = f"atlas-dagster {current_worker()} run {run_id or '-'}"[:63]
    connection.execute(text("SELECT set_config('application_name', :name, false)"), {"name": name})
    take = text("SELECT pg_try_advisory_lock(:id)")
    if not connection.execute(take, {"id": lock_id}).scalar():
        wait = BoundedWait(what, wait_seconds, log, DayBusyError)
        while not connection.execute(take, {"id": lock_id}).scalar():
            wait.still_waiting(_advisory_holder(connection, lock_id))
            time.sleep(POLL_SECONDS)
        wait.done()
    try:
        yield
    finally:
        connection.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": lock_id})


def _advisory_holder(connection, lock_id: int) -> str:
    unsigned = lock_id & 0xFFFFFFFFFFFFFFFF
    row = connection.execute(
        text(_HOLDER_SQL), {"classid": unsigned >> 32, "objid": unsigned & 0xFFFFFFFF}
    ).first()
    if row is None:
        return "held by a session that just let go"
    return f"held by {row[0] or 'an unnamed session'} from {row[1] or 'local'} since {row[2]}"
