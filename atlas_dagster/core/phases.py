"""Wall and CPU seconds of each phase of a tenant-day's load, reported in its metadata."""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

# Every phase a day's load reports, in the order they run (the metadata's JSON sorts its keys).
PHASES: tuple[tuple[str, str], ...] = (
    ("list_and_footers", "list the day's files and read each Parquet footer"),
    ("check_schema", "footer schema, types and statistics against the contract"),
    ("slot_wait", "waiting for a slot of the Dagster pool atlas_insert"),
    ("engine_lock_wait", "waiting for the embedded engine's file lock"),
    ("engine_open", "opening the ClickHouse client (embedded: a chDB connection)"),
    ("ensure_schema", "schema digest check (DDL only when the schema files changed)"),
    ("previous_attempt", "the day's last attempt number (the run's bulk read; alone: a query)"),
    ("log_running", "backfill_log: running"),
    ("clear_day", "only when the run's bulk read found backfilled rows: their DELETE"),
    (
        "insert",
        "the INSERT statement through the Null table and the bridge MV, every row's "
        "rules checked inside it (on failure: the diagnosis naming file, column and row)",
    ),
    ("count_day", "distinct events of the tenant-day in the raw table (FINAL)"),
    ("explain_difference", "only on a shortfall: the export's rows and distinct event_ids"),
    ("log_completed", "backfill_log: completed"),
    ("progress_metadata", "the tenant's backfill progress for the materialization"),
    ("engine_close", "closing the client"),
)


def process_cpu_seconds() -> float:
    """User + system CPU of the whole process: the embedded engine's threads count too."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class PhaseTimer:
    """Accumulates per-phase wall seconds and process CPU seconds, in the order first seen.

    The CPU figure is the process's, so in a run loading several days at once it also holds
    what other threads spent meanwhile: exact for a one-day run, an upper bound otherwise.
    """

    wall: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        wall_started, cpu_started = time.monotonic(), process_cpu_seconds()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - wall_started, process_cpu_seconds() - cpu_started)

    def add(self, name: str, wall_seconds: float, cpu_seconds: float) -> None:
        self.wall[name] = self.wall.get(name, 0.0) + wall_seconds
        self.cpu[name] = self.cpu.get(name, 0.0) + cpu_seconds

    def as_json(self) -> dict[str, dict[str, float]]:
        return {
            "wall_seconds": {k: round(v, 4) for k, v in self.wall.items()},
            "process_cpu_seconds": {k: round(v, 4) for k, v in self.cpu.items()},
        }
