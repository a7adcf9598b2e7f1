"""Identity and liveness of the process that runs a day's INSERT: 'hostname:pid:start-ticks'."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

PROC = Path("/proc")
# Zombie (exited, not yet reaped by its parent) and dead: the process will never write again.
_EXITED_STATES = {"Z", "X"}


class WorkerState(Enum):
    ALIVE = "alive"
    GONE = "gone"
    REUSED = "reused"  # the pid now belongs to a process started later
    ELSEWHERE = "elsewhere"  # on another host: its liveness cannot be checked from here
    UNKNOWN = "unknown"  # no worker recorded (rows written before the column existed)


@dataclass(frozen=True)
class Worker:
    host: str
    pid: int
    start_ticks: int

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}:{self.start_ticks}"


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from field 3 on; the command name (field 2) may hold spaces and ')'."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rpartition(")")[2].split()


def start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (clock ticks after boot); None when the pid has exited."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in _EXITED_STATES:
        return None
    return int(fields[22 - 3])


def current_worker() -> Worker:
    pid = os.getpid()
    return Worker(socket.gethostname(), pid, start_ticks(pid) or 0)


def parse_worker(text: str) -> Worker | None:
    host, _, rest = text.rpartition(":")
    host, _, pid = host.rpartition(":")
    if not host or not pid.isdigit() or not rest.isdigit():
        return None
    return Worker(host, int(pid), int(rest))


def worker_state(text: str, host: str | None = None) -> WorkerState:
    worker = parse_worker(text)
    if worker is None:
        return WorkerState.UNKNOWN
    if worker.host != (host or socket.gethostname()):
        return WorkerState.ELSEWHERE
    ticks = start_ticks(worker.pid)
    if ticks is None:
        return WorkerState.GONE
    return WorkerState.ALIVE if ticks == worker.start_ticks else WorkerState.REUSED
