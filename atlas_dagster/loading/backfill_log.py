"""Writes tenant-day states to atlas.backfill_log (ReplacingMergeTree(updated_at), read FINAL)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.core.workers import current_worker
from atlas_dagster.resources.connection import run_command


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def _worker() -> str:
    return str(current_worker())


@dataclass
class LogEntry:
    organization_id: str
    brand_id: str
    domain: str
    partition_date: dt.date
    run_id: str
    attempt: int = 1
    status: str = "running"
    rows_loaded: int = 0
    source_rows: int = 0
    duplicate_rows: int = 0
    files: int = 0
    bytes: int = 0
    error_message: str = ""
    s3_path: str = ""
    query_id: str = ""
    source_files: str = ""  # the export's fingerprint (exports/fingerprint.py)
    worker: str = field(default_factory=_worker)
    started_at: dt.datetime = field(default_factory=_now)
    updated_at: dt.datetime = field(default_factory=_now)

    def key(self) -> dict[str, object]:
        return {
            "organization_id": self.organization_id,
            "brand_id": self.brand_id,
            "domain": self.domain,
            "partition_date": self.partition_date,
        }


# The columns of sql/queries/log_state.sql, in its order.
COLUMNS = (
    "organization_id",
    "brand_id",
    "domain",
    "partition_date",
    "status",
    "rows_loaded",
    "source_rows",
    "duplicate_rows",
    "files",
    "bytes",
    "error_message",
    "s3_path",
    "query_id",
    "source_files",
    "run_id",
    "attempt",
    "worker",
    "started_at",
    "updated_at",
)


def previous_attempt(client: Client, entry: LogEntry) -> int:
    return int(run_command(client, sql.query("previous_attempt"), entry.key()) or 0)


def _new_version(entry: LogEntry, status: str) -> None:
    # A strictly later version, so that FINAL always sees the newest state.
    entry.updated_at = max(_now(), entry.updated_at + dt.timedelta(microseconds=1))
    if status == "running":
        # The load step starts with its 'running' row (the day validated, its INSERT next).
        entry.started_at = entry.updated_at
    entry.status = status


def write(client: Client, entry: LogEntry, status: str) -> None:
    """Writes the entry's new state: one row, every value bound."""
    _new_version(entry, status)
    run_command(client, sql.query("log_state"), {n: getattr(entry, n) for n in COLUMNS})
