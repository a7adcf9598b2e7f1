"""A raw run's per-day lines in its run log: every day named, at most one event per kind a tick.

Each line the run log shows is one Dagster event, written on the run's reporting thread next to
the days' materializations and check evaluations, and kept by the instance for good. A line per
day ("INSERT started: …", "…: N rows from F files") was 2 of a small day's 7 events. Here the
days that start, or finish, within one tick share one line, items joined by "; ": measured on
the small bench (60 days), 7.14 → 5.28 events a tenant-day-domain and the load's process wall
34.3 → 32.1 s (medians of 5 interleaved pairs; docs/benchmarks.md, step 7). The first line of
each kind goes out at once, and the lines pending when the run waits go out within a tick plus
the scheduler's poll, so the log still says what is in flight.
"""

from __future__ import annotations

import time
from typing import Protocol

# A wait of at most this long (plus the scheduler's 0.5 s poll) for a day's line to show.
LINES_EVERY_SECONDS = 2.0
# A line never carries more days than this: a year's backlog stays readable line by line.
MAX_DAYS_PER_LINE = 20


class RunLog(Protocol):
    """Dagster's context.log (DagsterLogManager) or a logging.Logger."""

    def info(self, msg: str) -> object: ...


class _Lines:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.items: list[str] = []
        self.flushed_at: float | None = None

    def due(self, now: float, every_seconds: float) -> bool:
        if not self.items:
            return False
        first = self.flushed_at is None
        return (
            first
            or len(self.items) >= MAX_DAYS_PER_LINE
            or (now - (self.flushed_at or 0.0) >= every_seconds)
        )

    def take(self, now: float) -> str:
        # Never more than MAX_DAYS_PER_LINE: each added day ticks, and a full line is due.
        line = self.prefix + "; ".join(self.items)
        self.items, self.flushed_at = [], now
        return line


class DayLines:
    """Collects the run's per-day lines; `tick()` writes what is due, `flush()` everything."""

    def __init__(self, log: RunLog, every_seconds: float = LINES_EVERY_SECONDS) -> None:
        self.log = log
        self.every_seconds = every_seconds
        self._started = _Lines("INSERT started: ")
        self._loaded = _Lines("loaded: ")

    def started(self, item: str) -> None:
        """A day began its INSERT: '<table> <date|tenant> (worker <id>)'."""
        self._started.items.append(item)
        self.tick()

    def loaded(self, item: str) -> None:
        """A day is completed: '<table> <date|tenant>: N rows from F files, INSERT Xs'."""
        self._loaded.items.append(item)
        self.tick()

    def tick(self) -> None:
        now = time.monotonic()
        for kind in (self._started, self._loaded):
            if kind.due(now, self.every_seconds):
                self.log.info(kind.take(now))

    def flush(self) -> None:
        """Before a line that must follow them (a failure) and when the run ends."""
        now = time.monotonic()
        for kind in (self._started, self._loaded):
            if kind.items:
                self.log.info(kind.take(now))
