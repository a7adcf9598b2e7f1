"""Process-wide settings read from the environment: ClickHouse target, tenants file, load limits."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

# The backfill competes with real-time ingestion on the same cluster: never more INSERTs at once.
INSERT_HARD_CAP = 4
DEFAULT_PARALLEL_INSERTS = 3
RAMP_UP_DAYS_RANGE = (3, 5)
DEFAULT_RAMP_UP_DAYS = 3


class SettingsError(ValueError):
    """An environment setting is out of its allowed range; the message names it."""


def atlas_home(environ: Mapping[str, str] = os.environ) -> Path:
    """ATLAS_HOME, else the working directory: where an installed deployment keeps its defaults
    (tenants.yaml, and the embedded engine's data in .atlas/clickhouse). Never the package's own
    folder, which an installed wheel puts in site-packages."""
    return Path(environ.get("ATLAS_HOME") or Path.cwd()).resolve()


DSN_VARIABLE = "ATLAS_CLICKHOUSE_DSN"


def default_dsn() -> str:
    return f"chdb://{(atlas_home() / '.atlas' / 'clickhouse').as_posix()}"


def clickhouse_dsn() -> str:
    """The one DSN setting: ATLAS_CLICKHOUSE_DSN, else the embedded engine under ATLAS_HOME."""
    return os.environ.get(DSN_VARIABLE) or default_dsn()


def clickhouse_cluster() -> str | None:
    cluster = os.environ.get("ATLAS_CLICKHOUSE_CLUSTER") or None
    if cluster is not None and not IDENTIFIER_RE.fullmatch(cluster):
        raise SettingsError(f"ATLAS_CLICKHOUSE_CLUSTER={cluster!r} is not a valid cluster name")
    return cluster


def stale_sweep_seconds() -> int:
    """How often the stale-load sweep sensor runs (ATLAS_STALE_SWEEP_SECONDS, default 30)."""
    return _int_setting(
        "ATLAS_STALE_SWEEP_SECONDS", 30, 1, 86_400, "seconds between two sweeps of stale loads"
    )


def automation_interval_seconds() -> int:
    """How often the gold automation sensor ticks (ATLAS_AUTOMATION_SECONDS, default 30): gold
    of a landed tenant-day is requested within two ticks."""
    return _int_setting(
        "ATLAS_AUTOMATION_SECONDS", 30, 5, 3_600, "seconds between two gold automation ticks"
    )


def slot_wait_seconds() -> int:
    """ATLAS_SLOT_WAIT_SECONDS: the longest an INSERT waits for a slot of the pool (default 6 h).

    Claims of dead processes are freed while waiting, so reaching it means live loads held every
    slot that long: the day fails naming them, rather than waiting forever."""
    return _int_setting(
        "ATLAS_SLOT_WAIT_SECONDS", 6 * 3600, 1, 7 * 86_400, "seconds an INSERT waits for a slot"
    )


def backfill_wait_seconds() -> int:
    """ATLAS_BACKFILL_WAIT_SECONDS: how long `atlas-dagster backfill --wait` follows a backfill
    (default 24 h). Only the wait ends there: the backfill goes on in the daemon."""
    return _int_setting(
        "ATLAS_BACKFILL_WAIT_SECONDS",
        24 * 3600,
        1,
        30 * 86_400,
        "seconds `atlas-dagster backfill --wait` follows a backfill",
    )


def tenants_file() -> Path:
    return Path(os.environ.get("ATLAS_TENANTS_FILE") or atlas_home() / "tenants.yaml")


Number = TypeVar("Number", int, float)


def _int_setting(name: str, default: int, low: int, high: int, why: str) -> int:
    return _bounded_setting(name, default, low, high, why, int, "an integer")


def _float_setting(name: str, default: float, low: float, high: float, why: str) -> float:
    return _bounded_setting(name, default, low, high, why, float, "a number")


def _bounded_setting(
    name: str, default: Number, low: Number, high: Number, why: str,
    parse: Callable[[str], Number], kind: str,
) -> Number:  # fmt: skip
    """The variable's value parsed and held to [low, high]; unset or blank: the default."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = parse(raw)
    except ValueError as exc:
        raise SettingsError(f"{name}={raw!r} is not {kind}") from exc
    if not low <= value <= high:
        raise SettingsError(
            f"{name}={value} is refused: it must be between {low} and {high} ({why})"
        )
    return value


def parallel_inserts() -> int:
    """Steady-state INSERTs at once, which is also the limit of the Dagster pool atlas_insert."""
    return _int_setting(
        "ATLAS_MAX_PARALLEL_INSERTS",
        DEFAULT_PARALLEL_INSERTS,
        1,
        INSERT_HARD_CAP,
        f"never more than {INSERT_HARD_CAP} INSERTs in parallel: the backfill shares the cluster "
        "with real-time ingestion",
    )


# Parquet megabytes the embedded engine's INSERTs may hold in flight together. Small days run
# side by side (three 5k-row days: 0.15 MB each); a day above it runs alone, as every day did
# before: three 1M-row days (23 MB each) at once peaked at 2,341 MB of RSS against 1,228 MB one
# after the other, in the same 2.9-3.0 s.
DEFAULT_EMBEDDED_INFLIGHT_MB = 32


def embedded_inflight_bytes() -> int:
    """ATLAS_EMBEDDED_INFLIGHT_MB in bytes: how much Parquet embedded INSERTs hold at once."""
    megabytes = _int_setting(
        "ATLAS_EMBEDDED_INFLIGHT_MB",
        DEFAULT_EMBEDDED_INFLIGHT_MB,
        1,
        65_536,
        "Parquet megabytes the embedded engine's INSERTs may read at once",
    )
    return megabytes * 1024 * 1024


def ramp_up_days() -> int:
    """How many of a tenant's newest days load one INSERT at a time before parallelism rises."""
    low, high = RAMP_UP_DAYS_RANGE
    return _int_setting(
        "ATLAS_RAMP_UP_DAYS",
        DEFAULT_RAMP_UP_DAYS,
        low,
        high,
        "the runbook validates 3 to 5 days before running INSERTs in parallel",
    )


def check_load_limits() -> None:
    """Raises SettingsError for an out-of-range ATLAS_MAX_PARALLEL_INSERTS, ATLAS_RAMP_UP_DAYS,
    ATLAS_EMBEDDED_INFLIGHT_MB, or a retry or backpressure setting."""
    parallel_inserts()
    ramp_up_days()
    embedded_inflight_bytes()
    for setting in (
        retry_attempts,
        retry_base_seconds,
        retry_max_seconds,
        recovery_seconds,
        health_probe_seconds,
        health_threshold,
    ):
        setting()


# Retries of a tenant-day's transient failures (loading/faults.py says which), inside its run.
# Five attempts with waits of about 2, 4, 8 and 16 s ride out a storm of S3 503s (measured: a
# storm of every 2nd GET 503 and every 6th reset failed 1 of 32 days once, at its first try)
# and an engine's merges catching up, while a permanent outage still fails the day in < 1 min.
DEFAULT_RETRY_ATTEMPTS = 5


def retry_attempts() -> int:
    """ATLAS_RETRY_ATTEMPTS: tries of a tenant-day, the first included (1 = no retry)."""
    return _int_setting(
        "ATLAS_RETRY_ATTEMPTS", DEFAULT_RETRY_ATTEMPTS, 1, 20, "tries of one tenant-day"
    )


def retry_base_seconds() -> float:
    """ATLAS_RETRY_BASE_SECONDS: the first retry's wait before jitter; it doubles per try."""
    return _float_setting(
        "ATLAS_RETRY_BASE_SECONDS", 2.0, 0.01, 600.0, "the first retry's wait in seconds"
    )


def retry_max_seconds() -> float:
    """ATLAS_RETRY_MAX_SECONDS: the longest wait between two tries of a tenant-day."""
    return _float_setting(
        "ATLAS_RETRY_MAX_SECONDS", 300.0, 0.01, 86_400.0, "the longest wait between tries"
    )


def recovery_seconds() -> float:
    """ATLAS_BACKPRESSURE_RECOVERY_SECONDS: how long without pushback before the effective INSERT
    concurrency steps up by one (towards ATLAS_MAX_PARALLEL_INSERTS)."""
    return _float_setting(
        "ATLAS_BACKPRESSURE_RECOVERY_SECONDS",
        60.0,
        0.1,
        86_400.0,
        "seconds without pushback before one more INSERT runs at once",
    )


def health_probe_seconds() -> float:
    """ATLAS_HEALTH_PROBE_SECONDS: how often a run reads the service's health (parts of the raw
    tables' partitions, delayed/rejected inserts, ATLAS_HEALTH_QUERY)."""
    return _float_setting(
        "ATLAS_HEALTH_PROBE_SECONDS", 10.0, 0.1, 3_600.0, "seconds between two health probes"
    )


def health_query() -> str:
    """ATLAS_HEALTH_QUERY: the operator's SQL returning one number (e.g. ClickPipes lag in
    seconds); above ATLAS_HEALTH_THRESHOLD the service is pushing back. Empty: not probed."""
    return os.environ.get("ATLAS_HEALTH_QUERY", "").strip()


def health_threshold() -> float:
    """ATLAS_HEALTH_THRESHOLD: the ATLAS_HEALTH_QUERY value above which INSERTs step down."""
    return _float_setting(
        "ATLAS_HEALTH_THRESHOLD", 0.0, -1e18, 1e18, "the health query's largest healthy value"
    )


# A partition of a raw table holding this share of parts_to_delay_insert already pushes back:
# ClickHouse starts delaying INSERTs at 1.0 and refuses them at parts_to_throw_insert.
PARTS_PRESSURE_RATIO = 0.5


DEFAULT_LIABILITY_LOOKBACK_DAYS = 90


def liability_lookback_days() -> int:
    """ATLAS_LIABILITY_LOOKBACK_DAYS: how many days of opened bets the liability counts."""
    return _int_setting(
        "ATLAS_LIABILITY_LOOKBACK_DAYS",
        DEFAULT_LIABILITY_LOOKBACK_DAYS,
        1,
        3660,
        "a lookback of bets opened within that many days",
    )


# The client progress reports (atlas_dagster/reporting/): where they go and how often.
DEFAULT_REPORT_CRON = "0 6 * * *"
CRON_FIELD_RE = re.compile(r"^[0-9*/,-]+$")


def report_cron() -> str:
    """ATLAS_REPORT_CRON: when every tenant's report is refreshed (default daily at 06:00 UTC)."""
    cron = os.environ.get("ATLAS_REPORT_CRON", "").strip() or DEFAULT_REPORT_CRON
    fields = cron.split()
    if len(fields) != 5 or not all(CRON_FIELD_RE.fullmatch(f) for f in fields):
        raise SettingsError(
            f"ATLAS_REPORT_CRON={cron!r} is not a five-field cron schedule (e.g. '0 6 * * *')"
        )
    return cron


def reports_location() -> str:
    """ATLAS_REPORTS_LOCATION: a folder, an s3://bucket/prefix, or a template with {source}
    (the tenant's export source, e.g. '{source}/reports'); default $ATLAS_HOME/.atlas/reports."""
    location = os.environ.get("ATLAS_REPORTS_LOCATION", "").strip()
    return location.rstrip("/") or (atlas_home() / ".atlas" / "reports").as_posix()
