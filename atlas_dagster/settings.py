"""Every setting's name, default and bounds, read from the environment in one place.

`Settings.from_env()` parses and validates every ATLAS_ variable at once into a frozen, typed
object; nothing else in the package reads them. Where each reads it:

* the code location (definitions.py) builds it once when it loads, refusing a bad value there
  rather than mid-backfill, and wires what runs need as Dagster resources: the load's tunables
  (`LoadSettings`) as the resource `atlas_settings` (resources/atlas_settings.py), the
  ClickHouse target as `clickhouse`. A run takes them from its resources and passes the values
  down (retry policy, backpressure, scheduler, pool); it reads no setting itself.
* the run coordinator (built by Dagster from dagster.yaml in the daemon and the webserver)
  reads `Settings.from_env()` once when it is built and passes the tenants file down.
* the CLI uses `current_settings()`: `Settings.from_env()` of this process, parsed again only
  when an ATLAS_ variable or the working directory changed. Nothing below the CLI, the code
  location and the coordinator reads a setting: each receives the values it needs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

# The backfill competes with real-time ingestion on the same cluster: never more INSERTs at once.
INSERT_HARD_CAP = 4
DEFAULT_PARALLEL_INSERTS = 3
RAMP_UP_DAYS_RANGE = (3, 5)
DEFAULT_RAMP_UP_DAYS = 3

DSN_VARIABLE = "ATLAS_CLICKHOUSE_DSN"
CLUSTER_VARIABLE = "ATLAS_CLICKHOUSE_CLUSTER"
HEALTH_QUERY_VARIABLE = "ATLAS_HEALTH_QUERY"
DEFAULT_DAGSTER_URL = "http://127.0.0.1:3000"


class SettingsError(ValueError):
    """An environment setting is out of its allowed range; the message names it."""


def atlas_home(environ: Mapping[str, str]) -> Path:
    """ATLAS_HOME, else the working directory: where an installed deployment keeps its defaults
    (tenants.yaml, and the embedded engine's data in .atlas/clickhouse). Never the package's own
    folder, which an installed wheel puts in site-packages."""
    return Path(environ.get("ATLAS_HOME") or Path.cwd()).resolve()


def _text(environ: Mapping[str, str], name: str) -> str:
    """The variable's value, stripped; unset and blank are both ''."""
    return environ.get(name, "").strip()


def is_set(environ: Mapping[str, str], name: str) -> bool:
    """Whether the variable holds a value (a blank one counts as unset: the default applies)."""
    return bool(_text(environ, name))


@dataclass(frozen=True)
class Bounded:
    """One numeric variable: its default and the inclusive range it must hold to."""

    variable: str
    default: int | float
    low: int | float
    high: int | float
    why: str
    kind: type[int] | type[float] = int

    def parse(self, environ: Mapping[str, str]) -> int | float:
        """The variable's value parsed and held to [low, high]; unset or blank: the default."""
        raw = _text(environ, self.variable)
        if not raw:
            return self.default
        try:
            value = self.kind(raw)
        except ValueError as exc:
            what = "an integer" if self.kind is int else "a number"
            raise SettingsError(f"{self.variable}={raw!r} is not {what}") from exc
        return self.check(value)

    def check(self, value: int | float) -> int | float:
        """A value from anywhere (the environment, a resource's config) held to [low, high]."""
        if not self.low <= value <= self.high:
            raise SettingsError(
                f"{self.variable}={value} is refused: it must be between {self.low} and "
                f"{self.high} ({self.why})"
            )
        return value

    def describe(self) -> str:
        return (
            f"{self.variable} (default {self.default:g}, {self.low:g} to {self.high:g}): {self.why}"
        )


# The load's tunables: a run gets them from the resource atlas_settings.
PARALLEL_INSERTS = Bounded(
    "ATLAS_MAX_PARALLEL_INSERTS",
    DEFAULT_PARALLEL_INSERTS,
    1,
    INSERT_HARD_CAP,
    f"never more than {INSERT_HARD_CAP} INSERTs in parallel: the backfill shares the cluster "
    "with real-time ingestion",
)
RAMP_UP_DAYS = Bounded(
    "ATLAS_RAMP_UP_DAYS",
    DEFAULT_RAMP_UP_DAYS,
    *RAMP_UP_DAYS_RANGE,
    "the runbook validates 3 to 5 days before running INSERTs in parallel",
)
# Retries of a tenant-day's transient failures (loading/faults.py says which), inside its run.
# Five attempts with waits of about 2, 4, 8 and 16 s ride out a storm of S3 503s (measured: a
# storm of every 2nd GET 503 and every 6th reset failed 1 of 32 days once, at its first try)
# and an engine's merges catching up, while a permanent outage still fails the day in < 1 min.
DEFAULT_RETRY_ATTEMPTS = 5
RETRY_ATTEMPTS = Bounded(
    "ATLAS_RETRY_ATTEMPTS", DEFAULT_RETRY_ATTEMPTS, 1, 20, "tries of one tenant-day"
)
RETRY_BASE_SECONDS = Bounded(
    "ATLAS_RETRY_BASE_SECONDS", 2.0, 0.01, 600.0, "the first retry's wait in seconds", float
)
RETRY_MAX_SECONDS = Bounded(
    "ATLAS_RETRY_MAX_SECONDS", 300.0, 0.01, 86_400.0, "the longest wait between tries", float
)
RECOVERY_SECONDS = Bounded(
    "ATLAS_BACKPRESSURE_RECOVERY_SECONDS",
    60.0,
    0.1,
    86_400.0,
    "seconds without pushback before one more INSERT runs at once",
    float,
)
HEALTH_PROBE_SECONDS = Bounded(
    "ATLAS_HEALTH_PROBE_SECONDS", 10.0, 0.1, 3_600.0, "seconds between two health probes", float
)
HEALTH_THRESHOLD = Bounded(
    "ATLAS_HEALTH_THRESHOLD", 0.0, -1e18, 1e18, "the health query's largest healthy value", float
)
SLOT_WAIT_SECONDS = Bounded(
    "ATLAS_SLOT_WAIT_SECONDS", 6 * 3600, 1, 7 * 86_400, "seconds an INSERT waits for a slot"
)


@dataclass(frozen=True)
class LoadSettings:
    """The run-time tunables of a raw run, validated when built (from the environment or from
    the resource atlas_settings' config); errors name the variable."""

    # Steady-state INSERTs at once, which is also the limit the Dagster pool atlas_insert is
    # seeded with.
    parallel_inserts: int = PARALLEL_INSERTS.default
    # How many of a tenant's newest days load one INSERT at a time before parallelism rises.
    ramp_up_days: int = RAMP_UP_DAYS.default
    # Tries of a tenant-day, the first included (1 = no retry).
    retry_attempts: int = RETRY_ATTEMPTS.default
    # The first retry's wait before jitter; it doubles per try.
    retry_base_seconds: float = RETRY_BASE_SECONDS.default
    # The longest wait between two tries of a tenant-day.
    retry_max_seconds: float = RETRY_MAX_SECONDS.default
    # How long without pushback before the effective INSERT concurrency steps up by one
    # (towards parallel_inserts).
    recovery_seconds: float = RECOVERY_SECONDS.default
    # How often a run reads the service's health (parts of the raw tables' partitions,
    # delayed/rejected inserts, the health query).
    health_probe_seconds: float = HEALTH_PROBE_SECONDS.default
    # The operator's SQL returning one number (e.g. ClickPipes lag in seconds); above
    # health_threshold the service is pushing back. Empty: not probed.
    health_query: str = ""
    # The health query's value above which INSERTs step down.
    health_threshold: float = HEALTH_THRESHOLD.default
    # The longest an INSERT waits for a slot of the pool (default 6 h). Claims of dead processes
    # are freed while waiting, so reaching it means live loads held every slot that long: the
    # day fails naming them, rather than waiting forever.
    slot_wait_seconds: int = SLOT_WAIT_SECONDS.default

    def __post_init__(self) -> None:
        _parse_all({f: partial(b.check, getattr(self, f)) for f, b in LOAD_BOUNDS.items()})
        object.__setattr__(self, "health_query", self.health_query.strip())

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> LoadSettings:
        values = _parse_all({f: partial(b.parse, environ) for f, b in LOAD_BOUNDS.items()})
        return cls(**values, health_query=_text(environ, HEALTH_QUERY_VARIABLE))  # type: ignore[arg-type]


# LoadSettings' numeric fields and their variables (health_query is HEALTH_QUERY_VARIABLE).
LOAD_BOUNDS: dict[str, Bounded] = {
    "parallel_inserts": PARALLEL_INSERTS,
    "ramp_up_days": RAMP_UP_DAYS,
    "retry_attempts": RETRY_ATTEMPTS,
    "retry_base_seconds": RETRY_BASE_SECONDS,
    "retry_max_seconds": RETRY_MAX_SECONDS,
    "recovery_seconds": RECOVERY_SECONDS,
    "health_probe_seconds": HEALTH_PROBE_SECONDS,
    "health_threshold": HEALTH_THRESHOLD,
    "slot_wait_seconds": SLOT_WAIT_SECONDS,
}

# A partition of a raw table holding this share of parts_to_delay_insert already pushes back:
# ClickHouse starts delaying INSERTs at 1.0 and refuses them at parts_to_throw_insert.
PARTS_PRESSURE_RATIO = 0.5

# Parquet megabytes the embedded engine's INSERTs may hold in flight together. Small days run
# side by side (three 5k-row days: 0.15 MB each); a day above it runs alone, as every day did
# before: three 1M-row days (23 MB each) at once peaked at 2,341 MB of RSS against 1,228 MB one
# after the other, in the same 2.9-3.0 s.
DEFAULT_EMBEDDED_INFLIGHT_MB = 32
EMBEDDED_INFLIGHT_MB = Bounded(
    "ATLAS_EMBEDDED_INFLIGHT_MB",
    DEFAULT_EMBEDDED_INFLIGHT_MB,
    1,
    65_536,
    "Parquet megabytes the embedded engine's INSERTs may read at once",
)

DEFAULT_LIABILITY_LOOKBACK_DAYS = 90
LIABILITY_LOOKBACK_DAYS = Bounded(
    "ATLAS_LIABILITY_LOOKBACK_DAYS",
    DEFAULT_LIABILITY_LOOKBACK_DAYS,
    1,
    3660,
    "a lookback of bets opened within that many days",
)
STALE_SWEEP_SECONDS = Bounded(
    "ATLAS_STALE_SWEEP_SECONDS", 30, 1, 86_400, "seconds between two sweeps of stale loads"
)
# Re-delivered exports cost a listing per tenant-domain window to find (bench/bench_changes.py):
# every 15 minutes by default, for the tenants with reload_changed only.
REDELIVERY_SECONDS = Bounded(
    "ATLAS_REDELIVERY_SECONDS",
    900,
    30,
    86_400,
    "seconds between two scans for re-delivered exports (tenants with reload_changed)",
)
AUTOMATION_SECONDS = Bounded(
    "ATLAS_AUTOMATION_SECONDS", 30, 5, 3_600, "seconds between two gold automation ticks"
)
BACKFILL_WAIT_SECONDS = Bounded(
    "ATLAS_BACKFILL_WAIT_SECONDS",
    24 * 3600,
    1,
    30 * 86_400,
    "seconds `atlas-dagster backfill --wait` follows a backfill",
)

# The client progress reports (atlas_dagster/reporting/): where they go and how often.
DEFAULT_REPORT_CRON = "0 6 * * *"
CRON_FIELD_RE = re.compile(r"^[0-9*/,-]+$")


def check_cluster(cluster: str) -> str:
    """A cluster name safe to put in a query (s3Cluster's first argument)."""
    if not IDENTIFIER_RE.fullmatch(cluster):
        raise SettingsError(f"{CLUSTER_VARIABLE}={cluster!r} is not a valid cluster name")
    return cluster


def _report_cron(environ: Mapping[str, str]) -> str:
    cron = _text(environ, "ATLAS_REPORT_CRON") or DEFAULT_REPORT_CRON
    fields = cron.split()
    if len(fields) != 5 or not all(CRON_FIELD_RE.fullmatch(f) for f in fields):
        raise SettingsError(
            f"ATLAS_REPORT_CRON={cron!r} is not a five-field cron schedule (e.g. '0 6 * * *')"
        )
    return cron


def _parse_all(readers: Mapping[str, Callable[[], object]]) -> dict[str, object]:
    """Every reader's value; every SettingsError raised together, so that one look at the
    message names all the bad variables."""
    values: dict[str, object] = {}
    errors: list[str] = []
    for name, read in readers.items():
        try:
            values[name] = read()
        except SettingsError as exc:
            errors.append(str(exc))
    if errors:
        raise SettingsError("; ".join(errors))
    return values


@dataclass(frozen=True)
class Settings:
    """Every setting of the process, typed; built by `Settings.from_env()`."""

    # ATLAS_HOME, else the working directory: where the path defaults below live.
    home: Path
    # ATLAS_CLICKHOUSE_DSN: chdb:///abs/path (embedded) or http(s)://user:password@host:port;
    # default the embedded engine under home/.atlas/clickhouse.
    clickhouse_dsn: str
    # ATLAS_CLICKHOUSE_CLUSTER: a day's read uses s3Cluster over it; None: plain s3.
    clickhouse_cluster: str | None
    # ATLAS_TENANTS_FILE, default home/tenants.yaml.
    tenants_file: Path
    # The run's tunables (the resource atlas_settings shows them in Dagster).
    load: LoadSettings
    # ATLAS_EMBEDDED_INFLIGHT_MB: how much Parquet embedded INSERTs hold at once.
    embedded_inflight_mb: int = EMBEDDED_INFLIGHT_MB.default
    # ATLAS_LIABILITY_LOOKBACK_DAYS: how many days of opened bets the liability counts.
    liability_lookback_days: int = LIABILITY_LOOKBACK_DAYS.default
    # ATLAS_STALE_SWEEP_SECONDS: how often the stale-load sweep sensor runs.
    stale_sweep_seconds: int = STALE_SWEEP_SECONDS.default
    # ATLAS_REDELIVERY_SECONDS: how often the re-delivery sensor lists the exports of the
    # tenants with reload_changed: true.
    redelivery_seconds: int = REDELIVERY_SECONDS.default
    # ATLAS_AUTOMATION_SECONDS: how often the gold automation sensor ticks (gold of a landed
    # tenant-day is requested within two ticks).
    automation_seconds: int = AUTOMATION_SECONDS.default
    # ATLAS_BACKFILL_WAIT_SECONDS: how long `atlas-dagster backfill --wait` follows a backfill
    # (default 24 h). Only the wait ends there: the backfill goes on in the daemon.
    backfill_wait_seconds: int = BACKFILL_WAIT_SECONDS.default
    # ATLAS_REPORT_CRON: when every tenant's report is refreshed (default daily at 06:00 UTC).
    report_cron: str = DEFAULT_REPORT_CRON
    # ATLAS_REPORTS_LOCATION: a folder, an s3://bucket/prefix, or a template with {source}
    # (the tenant's export source, e.g. '{source}/reports'); default home/.atlas/reports.
    reports_location: str = ""
    # ATLAS_DAGSTER_URL: the webserver `backfill`, `cancel` and `demo` talk to.
    dagster_url: str = DEFAULT_DAGSTER_URL

    @property
    def embedded_inflight_bytes(self) -> int:
        return self.embedded_inflight_mb * 1024 * 1024

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        """Every variable parsed and validated; a SettingsError names each bad one, its value
        and the range it must hold to."""
        home = atlas_home(environ)
        cluster = environ.get(CLUSTER_VARIABLE) or ""  # unstripped: a run resolves it as is
        reports = _text(environ, "ATLAS_REPORTS_LOCATION").rstrip("/")
        values = _parse_all(
            {
                "load": lambda: LoadSettings.from_env(environ),
                "clickhouse_cluster": lambda: check_cluster(cluster) if cluster else None,
                "embedded_inflight_mb": lambda: EMBEDDED_INFLIGHT_MB.parse(environ),
                "liability_lookback_days": lambda: LIABILITY_LOOKBACK_DAYS.parse(environ),
                "stale_sweep_seconds": lambda: STALE_SWEEP_SECONDS.parse(environ),
                "automation_seconds": lambda: AUTOMATION_SECONDS.parse(environ),
                "redelivery_seconds": lambda: REDELIVERY_SECONDS.parse(environ),
                "backfill_wait_seconds": lambda: BACKFILL_WAIT_SECONDS.parse(environ),
                "report_cron": lambda: _report_cron(environ),
            }
        )
        return cls(
            home=home,
            clickhouse_dsn=(
                environ.get(DSN_VARIABLE) or f"chdb://{(home / '.atlas' / 'clickhouse').as_posix()}"
            ),
            tenants_file=Path(environ.get("ATLAS_TENANTS_FILE") or home / "tenants.yaml"),
            reports_location=reports or (home / ".atlas" / "reports").as_posix(),
            dagster_url=environ.get("ATLAS_DAGSTER_URL") or DEFAULT_DAGSTER_URL,
            **values,  # type: ignore[arg-type]
        )


_current: tuple[tuple[str, tuple[tuple[str, str], ...]], Settings] | None = None


def current_settings() -> Settings:
    """`Settings.from_env()` of this process, for the CLI. Parsed once, and again only when an
    ATLAS_ variable or the working directory changed (tests and the demo set them in-process)."""
    global _current
    key = (
        os.getcwd(),
        tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("ATLAS_"))),
    )
    cached = _current
    if cached is not None and cached[0] == key:
        return cached[1]
    settings = Settings.from_env()
    _current = (key, settings)
    return settings
