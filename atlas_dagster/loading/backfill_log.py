"""Writes tenant-day states to atlas.backfill_log (ReplacingMergeTree(updated_at), read FINAL)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.monitoring.workers import current_worker


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
    "run_id",
    "attempt",
    "worker",
    "started_at",
    "updated_at",
)


# Every character with a meaning inside a quoted literal, as its ClickHouse escape sequence. Not
# the driver's binder: it leaves a newline as backslash + newline, which the VALUES parser
# refuses (error messages hold newlines).
_ESCAPES = str.maketrans(
    {
        "\\": "\\\\",
        "'": "\\'",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\0": "\\0",
        "\b": "\\b",
        "\f": "\\f",
    }
)


def _literal(value: object) -> str:
    """A ClickHouse literal of a backfill_log value; datetimes keep their microseconds (two
    versions of a row may differ by one)."""
    if isinstance(value, dt.datetime):
        return f"'{value.isoformat(sep=' ', timespec='microseconds')}'"
    if isinstance(value, dt.date):
        return f"'{value.isoformat()}'"
    if isinstance(value, str):
        return f"'{value.translate(_ESCAPES)}'"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"backfill_log value of unexpected type {type(value).__name__}")


def values_row(entry: LogEntry) -> str:
    return "(" + ", ".join(_literal(getattr(entry, name)) for name in COLUMNS) + ")"


def as_row(entry: LogEntry) -> dict[str, object]:
    """The row as a read of backfill_log returns it (what the checks read)."""
    return {name: getattr(entry, name) for name in COLUMNS}


def previous_attempt(client: Client, entry: LogEntry) -> int:
    return int(client.command(sql.query("previous_attempt"), parameters=entry.key()) or 0)


def write(client: Client, entry: LogEntry, status: str) -> None:
    # A strictly later version, so that FINAL always sees the newest state.
    entry.updated_at = max(_now(), entry.updated_at + dt.timedelta(microseconds=1))
    if status == "running":
        # The load step starts with its 'running' row (the engine is open, the day validated).
        entry.started_at = entry.updated_at
    entry.status = status
    client.command(sql.query("log_state", rows=values_row(entry)))
