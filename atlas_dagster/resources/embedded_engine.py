"""The embedded engine's one-process-at-a-time rule: a file lock, its waiters, and a kept engine.

chDB lets one process at a time hold a data directory ("Cannot lock file .../status"), and every
Dagster run is its own process. A unit of work takes the lock, opens the engine, and closes and
releases both at its end, while other processes wait their turn (bounded, logged). A run loading
many days may instead keep the engine open between its units of work (`KeptEngine`): opening it
costs ~0.3 s and restarts its background merges, which measured here as much time as the
INSERTs themselves over a 30-day backfill. It still hands the engine over at the end of a unit
whenever another process is waiting, so nobody waits longer than one unit of work.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from clickhouse_connect.driver.client import Client

log = logging.getLogger("atlas_dagster.clickhouse")

POLL_SECONDS = 0.05
HANDOVER_SECONDS = 2.0  # how long a holder that yielded lets its waiters take the engine first
# An engine kept open with no unit for this long is idle (its process waits on something else,
# e.g. an INSERT slot): handed over to a waiting process. Units of a busy run follow each other
# within milliseconds, so they keep the engine.
IDLE_HANDOVER_SECONDS = 1.0


class EngineBusyError(TimeoutError):
    """Another process held the embedded engine for longer than the bounded wait."""


def _lock_path(data_dir: Path) -> Path:
    return data_dir.parent / f"{data_dir.name}.lock"


def _waiting_dir(data_dir: Path) -> Path:
    return data_dir.parent / f"{data_dir.name}.waiting"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def other_waiters(data_dir: Path) -> set[str]:
    """Processes other than this one waiting for the engine (entries of dead ones are dropped)."""
    waiting = set()
    folder = _waiting_dir(data_dir)
    for entry in folder.glob("*") if folder.is_dir() else []:
        pid_text = entry.name.split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        if _alive(int(pid_text)):
            waiting.add(entry.name)
        else:
            entry.unlink(missing_ok=True)
    return waiting


@contextlib.contextmanager
def _registered_waiter(data_dir: Path) -> Iterator[None]:
    """Tells the holder someone waits, so it hands the engine over at the end of its unit."""
    folder = _waiting_dir(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / f"{os.getpid()}-{threading.get_ident()}"
    entry.touch()
    try:
        yield
    finally:
        entry.unlink(missing_ok=True)


def acquire_file_lock(data_dir: Path, wait_seconds: float) -> IO[str]:
    """Takes the data directory's lock, waiting at most `wait_seconds`; returns its handle."""
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    handle = open(_lock_path(data_dir), "a+")  # noqa: SIM115 - kept open while the lock is held
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return handle
    except BlockingIOError:
        pass
    except BaseException:
        handle.close()
        raise
    started = time.monotonic()
    log.info("embedded ClickHouse at %s is busy; waiting for it", data_dir)
    try:
        with _registered_waiter(data_dir):
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() - started > wait_seconds:
                        raise EngineBusyError(
                            f"embedded ClickHouse at {data_dir} stayed busy for {wait_seconds:.0f}s"
                        ) from None
                    time.sleep(POLL_SECONDS)
    except BaseException:
        handle.close()
        raise
    log.info("embedded ClickHouse free after %.1fs", time.monotonic() - started)
    return handle


def release_file_lock(handle: IO[str]) -> None:
    try:
        fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()


class KeptEngine:
    """This process's engine, kept open between units of work while nobody else waits for it.

    Threads of the process take turns (one unit of work at a time, as the engine runs one
    statement stream per process here anyway); another process waiting gets the engine at the
    end of the current unit.
    """

    def __init__(
        self, data_dir: Path, open_client: Callable[[], Client], wait_seconds: float
    ) -> None:
        self.data_dir = data_dir
        self.open_client = open_client
        self.wait_seconds = wait_seconds
        self._turn = threading.Lock()
        self._handle: IO[str] | None = None
        self._client: Client | None = None
        # Between units the process may wait on something else (an INSERT slot another process
        # holds while it waits for this engine): a watcher hands the idle engine over too.
        self._stopped = threading.Event()
        self._idle_since = time.monotonic()
        self._watcher = threading.Thread(target=self._hand_over_when_idle, daemon=True)
        self._watcher.start()

    @contextlib.contextmanager
    def unit(
        self, on_phase: Callable[[str], contextlib.AbstractContextManager]
    ) -> Iterator[Client]:
        if not self._turn.acquire(timeout=self.wait_seconds):
            raise EngineBusyError(f"embedded ClickHouse at {self.data_dir} stayed busy in-process")
        try:
            if self._client is None:
                with on_phase("engine_lock_wait"):
                    self._handle = acquire_file_lock(self.data_dir, self.wait_seconds)
                with on_phase("engine_open"):
                    self._client = self.open_client()
            try:
                yield self._client
            except BaseException:
                self.close()  # a unit that failed may leave the session unusable: reopen next
                raise
            waiters = other_waiters(self.data_dir)
            if waiters:
                with on_phase("engine_close"):
                    self.close()
                _let_waiters_in(self.data_dir, waiters)
        finally:
            self._idle_since = time.monotonic()
            self._turn.release()

    def _hand_over_when_idle(self) -> None:
        while not self._stopped.wait(POLL_SECONDS):
            if not self._turn.acquire(blocking=False):
                continue  # a unit is running: it hands over at its end
            try:
                idle = time.monotonic() - self._idle_since >= IDLE_HANDOVER_SECONDS
                waiters = other_waiters(self.data_dir) if idle and self._client else set()
                if waiters:
                    self.close()
                    _let_waiters_in(self.data_dir, waiters)
            finally:
                self._turn.release()

    def shut(self) -> None:
        """Stops the idle watcher and closes the engine: the end of the kept_open() scope."""
        self._stopped.set()
        self._watcher.join()
        self.close()

    def close(self) -> None:
        client, handle = self._client, self._handle
        self._client = self._handle = None
        try:
            if client is not None:
                client.close()
        finally:
            if handle is not None:
                release_file_lock(handle)


def _let_waiters_in(data_dir: Path, waiters: set[str]) -> None:
    """Waits (briefly) until the processes seen waiting took the engine, so as not to retake it
    first: the file lock itself is not first-come, first-served."""
    deadline = time.monotonic() + HANDOVER_SECONDS
    while waiters & other_waiters(data_dir) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
