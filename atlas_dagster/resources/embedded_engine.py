"""The embedded engine's one-process-at-a-time rule: a file lock, its waiters, and a kept engine.

chDB lets one process at a time hold a data directory ("Cannot lock file .../status"), and every
Dagster run is its own process. A unit of work takes the lock, opens the engine, and closes and
releases both at its end, while other processes wait their turn (bounded, logged). A run loading
many days may instead keep the engine open between its units of work (`KeptEngine`): opening it
costs ~0.3 s and restarts its background merges, which measured here as much time as the
INSERTs themselves over a 30-day backfill. Its threads' units run side by side on their own
connections; once another process waits, no new unit starts and the last one in flight hands the
engine over, so nobody waits longer than the units already running.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import fcntl
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from clickhouse_connect.driver.client import Client

from atlas_dagster.core.waits import BoundedWait, WaitLog, WaitTimeout
from atlas_dagster.core.workers import WorkerState, current_worker, worker_state

POLL_SECONDS = 0.05
HANDOVER_SECONDS = 2.0  # how long a holder that yielded lets its waiters take the engine first
# An engine kept open with no unit for this long is idle (its process waits on something else,
# e.g. an INSERT slot): handed over to a waiting process. Units of a busy run follow each other
# within milliseconds, so they keep the engine.
IDLE_HANDOVER_SECONDS = 1.0
# ClickHouse writes its pid into <data dir>/status while it holds the directory.
_STATUS_PID_RE = re.compile(r"^PID: (\d+)$", re.MULTILINE)


class EngineBusyError(WaitTimeout):
    """Another process held the embedded engine for longer than the bounded wait."""


class EngineOpenError(RuntimeError):
    """The embedded engine could not be opened; the lock was released, the message says why."""


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


def _write_holder(handle: IO[str], run_id: str) -> None:
    """Records who holds the lock (worker, run, since when) in the lock file, for waiters."""
    handle.seek(0)
    handle.truncate()
    since = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    handle.write(json.dumps({"worker": str(current_worker()), "run_id": run_id, "since": since}))
    handle.flush()


def describe_holder(lock_file: Path) -> str:
    """Who holds a lock file written by `_write_holder`, and whether that process still lives."""
    try:
        holder = json.loads(lock_file.read_text() or "{}")
    except (OSError, ValueError):
        holder = {}
    worker = str(holder.get("worker", ""))
    if not worker:
        return f"held by a process that has not named itself yet (lock {lock_file})"
    state = worker_state(worker)
    text = f"held by worker {worker}"
    if holder.get("run_id"):
        text += f" (Dagster run {holder['run_id']})"
    text += f" since {holder.get('since', '?')}"
    if state in (WorkerState.GONE, WorkerState.REUSED):
        text += ", a process that is gone: the lock frees as soon as the kernel notices"
    return text


def _flock(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def acquire_lock_file(
    lock_file: Path,
    what: str,
    wait_seconds: float,
    log: WaitLog | None = None,
    run_id: str = "",
    on_wait: contextlib.AbstractContextManager | None = None,
    error: Callable[[str], Exception] = WaitTimeout,
) -> IO[str]:
    """Takes an exclusive lock file, waiting at most `wait_seconds` (reported, naming the holder);
    writes this process's identity into it and returns the handle. The kernel frees the lock
    when the holding process dies, however it dies."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    handle = open(lock_file, "a+")  # noqa: SIM115 - kept open while the lock is held
    try:
        if not _flock(handle):
            wait = BoundedWait(what, wait_seconds, log, error)
            with on_wait or contextlib.nullcontext():
                while not _flock(handle):
                    wait.still_waiting(describe_holder(lock_file))
                    time.sleep(POLL_SECONDS)
            wait.done()
        _write_holder(handle, run_id)
        return handle
    except BaseException:
        handle.close()
        raise


def acquire_file_lock(
    data_dir: Path, wait_seconds: float, log: WaitLog | None = None, run_id: str = ""
) -> IO[str]:
    """Takes the data directory's lock, waiting at most `wait_seconds`; returns its handle."""
    return acquire_lock_file(
        _lock_path(data_dir),
        f"embedded ClickHouse at {data_dir}",
        wait_seconds,
        log,
        run_id,
        on_wait=_registered_waiter(data_dir),
        error=EngineBusyError,
    )


def release_file_lock(handle: IO[str]) -> None:
    try:
        handle.seek(0)
        handle.truncate()  # nobody holds it: waiters must not name a former holder
        fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()


def _open_failure(data_dir: Path, exc: Exception) -> EngineOpenError:
    """Why the engine did not open, in one line: another process holding the directory outside
    this lock is named by the pid ClickHouse wrote into its status file."""
    try:
        match = _STATUS_PID_RE.search((data_dir / "status").read_text())
    except OSError:
        match = None
    pid = int(match.group(1)) if match else None
    if pid is not None and pid != os.getpid() and _alive(pid):
        reason = (
            f"process {pid} holds the data directory outside atlas-dagster's lock "
            f"{_lock_path(data_dir)}; stop it, or point ATLAS_CLICKHOUSE_DSN at another directory"
        )
    else:
        # chDB appends a C++ stack trace to some messages: the first line says it all.
        reason = str(exc).split("Stack trace", 1)[0].strip().splitlines()[0][:500]
    return EngineOpenError(f"embedded ClickHouse at {data_dir} could not be opened: {reason}")


def open_engine(
    data_dir: Path,
    open_client: Callable[[], Client],
    wait_seconds: float,
    on_phase: Callable[[str], contextlib.AbstractContextManager],
    log: WaitLog | None = None,
    run_id: str = "",
) -> tuple[Client, IO[str]]:
    """Lock, then open; the lock is released whenever the open fails, so that nobody (this
    process included) waits on a lock whose engine never opened."""
    with on_phase("engine_lock_wait"):
        try:
            handle = acquire_file_lock(data_dir, wait_seconds, log, run_id)
        except WaitTimeout:
            raise  # a TimeoutError, hence an OSError, but not a problem of the directory
        except OSError as exc:  # e.g. a parent of the data directory is a file
            why = exc.strerror or str(exc)
            if isinstance(exc, FileExistsError | NotADirectoryError):
                why = f"{exc.filename} exists and is not a directory"
            raise EngineOpenError(
                f"embedded ClickHouse at {data_dir} could not be opened: its lock file "
                f"{_lock_path(data_dir)} cannot be created: {why}"
            ) from exc
    try:
        with on_phase("engine_open"):
            return open_client(), handle
    except Exception as exc:
        release_file_lock(handle)
        raise _open_failure(data_dir, exc) from exc
    except BaseException:
        release_file_lock(handle)
        raise


class KeptEngine:
    """This process's engine, kept open between units of work while nobody else waits for it.

    Units of the process's threads run side by side, each on its own connection to the one
    engine (chDB runs queries of different connections in parallel): on 2 cores, three
    threads loading small days measured 1.2-1.3x the throughput of one. Another process waiting
    for the engine stops new units from starting; the last unit in flight closes the engine
    and hands it over, so nobody waits longer than the units already running.
    """

    def __init__(
        self,
        data_dir: Path,
        open_client: Callable[[], Client],
        wait_seconds: float,
        log: WaitLog | None = None,
        run_id: str = "",
    ) -> None:
        self.data_dir = data_dir
        self.open_client = open_client
        self.wait_seconds = wait_seconds
        self.log = log
        self.run_id = run_id
        # Guards everything below; notified whenever a unit ends or the engine opens or closes.
        self._gate = threading.Condition()
        self._in_flight = 0
        # A thread is opening or closing the engine, or another process waits for it: no unit
        # starts until that is over.
        self._exclusive = False
        self._draining = False
        self._handle: IO[str] | None = None
        self._idle: list[Client] = []  # connections of ended units, reused by the next ones
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
        client = self._start_unit(on_phase)
        try:
            yield client
        except BaseException:
            # A unit that failed may leave its connection unusable: it is closed, not reused
            # (the engine stays open for the other units while one connection does).
            _close_quietly(client)
            client = None
            raise
        finally:
            self._end_unit(client, on_phase)

    def _start_unit(self, on_phase: Callable[[str], contextlib.AbstractContextManager]) -> Client:
        deadline = time.monotonic() + self.wait_seconds
        with self._gate:
            while True:
                while self._exclusive or self._draining:
                    if not self._gate.wait(timeout=max(0.0, deadline - time.monotonic())):
                        raise EngineBusyError(
                            f"embedded ClickHouse at {self.data_dir} stayed busy in-process"
                        )
                waiters = other_waiters(self.data_dir) if self._handle is not None else set()
                if not waiters:
                    break
                if self._in_flight:  # the last unit in flight hands the engine over
                    self._draining = True
                    continue
                self._exclusive = True  # nothing in flight: this thread hands it over
                self._gate.release()
                try:
                    self._hand_over(waiters)
                finally:
                    self._gate.acquire()
            opening = self._handle is None
            if opening:
                self._exclusive = True  # this thread opens; the others wait for it
            else:
                self._in_flight += 1
                if self._idle:
                    return self._idle.pop()
        try:
            if not opening:  # one more connection to the open engine, made outside the gate
                return self.open_client()
            client, handle = open_engine(
                self.data_dir, self.open_client, self.wait_seconds, on_phase, self.log, self.run_id
            )
        except BaseException:
            with self._gate:
                if opening:
                    self._exclusive = False
                else:
                    self._in_flight -= 1
                self._gate.notify_all()
            raise
        with self._gate:
            self._handle, self._exclusive = handle, False
            self._in_flight += 1
            self._gate.notify_all()
        return client

    def _end_unit(
        self, client: Client | None, on_phase: Callable[[str], contextlib.AbstractContextManager]
    ) -> None:
        with self._gate:
            self._in_flight -= 1
            if client is not None:
                self._idle.append(client)
            self._idle_since = time.monotonic()
            waiters = other_waiters(self.data_dir) if self._handle is not None else set()
            if not waiters:
                self._draining = False  # whoever waited gave up meanwhile
            if not waiters or self._exclusive:
                self._gate.notify_all()
                return
            self._draining = True  # no new unit: the last one in flight hands the engine over
            if self._in_flight > 0:
                return
            self._exclusive = True
        with on_phase("engine_close"):
            self._hand_over(waiters)

    def _hand_over(self, waiters: set[str]) -> None:
        """Closes the engine and lets the waiting processes take it (this thread holds it
        exclusively: no unit in flight)."""
        try:
            self.close()
            _let_waiters_in(self.data_dir, waiters)
        finally:
            with self._gate:
                self._exclusive = self._draining = False
                self._gate.notify_all()

    def _hand_over_when_idle(self) -> None:
        while not self._stopped.wait(POLL_SECONDS):
            with self._gate:
                if self._in_flight or self._exclusive or self._handle is None:
                    continue  # units are running: the last one hands over at its end
                if time.monotonic() - self._idle_since < IDLE_HANDOVER_SECONDS:
                    continue
                waiters = other_waiters(self.data_dir)
                if not waiters:
                    continue
                self._exclusive = True
            self._hand_over(waiters)

    def shut(self) -> None:
        """Stops the idle watcher and closes the engine: the end of the kept_open() scope."""
        self._stopped.set()
        self._watcher.join()
        self.close()

    def close(self) -> None:
        """Closes every idle connection and releases the lock (no unit may be in flight)."""
        clients, handle = self._idle, self._handle
        self._idle, self._handle = [], None
        try:
            for client in clients:
                _close_quietly(client)
        finally:
            if handle is not None:
                release_file_lock(handle)


class InflightBytes:
    """The Parquet bytes of this process's INSERTs on the embedded engine, kept under a limit.

    Units run side by side on the engine (`KeptEngine`), and an INSERT's memory grows with its
    day. Days are admitted in the order they ask (first come, first served: a large day is not
    overtaken by the small ones behind it, and newest-first dispatch order holds), each when the
    bytes in flight leave room for it or nothing is in flight (so a day larger than the limit
    still runs, alone).
    """

    def __init__(self) -> None:
        self._room = threading.Condition()
        self._in_flight = 0
        self._queue: collections.deque[object] = collections.deque()

    @contextlib.contextmanager
    def hold(
        self,
        nbytes: int,
        limit: int,
        what: str,
        wait_seconds: float,
        log: WaitLog | None = None,
    ) -> Iterator[None]:
        ticket = object()
        with self._room:
            self._queue.append(ticket)
            try:
                self._wait_turn(ticket, nbytes, limit, what, wait_seconds, log)
            except BaseException:
                self._queue.remove(ticket)
                self._room.notify_all()
                raise
            self._queue.popleft()
            self._in_flight += nbytes
            self._room.notify_all()
        try:
            yield
        finally:
            with self._room:
                self._in_flight -= nbytes
                self._room.notify_all()

    def _wait_turn(
        self,
        ticket: object,
        nbytes: int,
        limit: int,
        what: str,
        wait_seconds: float,
        log: WaitLog | None,
    ) -> None:
        """Called with the condition held; returns once `ticket` is first and fits."""
        started, wait = time.monotonic(), None
        while not (
            self._queue[0] is ticket and (self._in_flight == 0 or self._in_flight + nbytes <= limit)
        ):
            # Reported only past a second: small days queue for milliseconds all the time.
            if wait is None and time.monotonic() - started >= 1.0:
                wait = BoundedWait(
                    f"room among the embedded INSERTs in flight for {what} "
                    f"({nbytes / 1e6:.1f} MB of Parquet)",
                    wait_seconds,
                    log,
                    EngineBusyError,
                )
            if wait is not None:
                wait.still_waiting(
                    f"{self._in_flight / 1e6:.1f} MB in flight, {limit / 1e6:.1f} MB allowed "
                    "(ATLAS_EMBEDDED_INFLIGHT_MB)"
                )
            self._room.wait(timeout=POLL_SECONDS * 10)
        if wait is not None:
            wait.done()


def _close_quietly(client: Client) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - a broken connection is being dropped anyway
        pass


def _let_waiters_in(data_dir: Path, waiters: set[str]) -> None:
    """Waits (briefly) until the processes seen waiting took the engine, so as not to retake it
    first: the file lock itself is not first-come, first-served."""
    deadline = time.monotonic() + HANDOVER_SECONDS
    while waiters & other_waiters(data_dir) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
