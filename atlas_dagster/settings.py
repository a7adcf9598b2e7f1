"""Process-wide settings read from the environment: ClickHouse DSN, cluster, tenants file."""

from __future__ import annotations

import os
import re
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def default_dsn() -> str:
    return f"chdb://{(PROJECT_ROOT / '.atlas' / 'clickhouse').as_posix()}"


def clickhouse_dsn() -> str:
    return os.environ.get("ATLAS_CLICKHOUSE_DSN") or default_dsn()


def clickhouse_cluster() -> str | None:
    cluster = os.environ.get("ATLAS_CLICKHOUSE_CLUSTER") or None
    if cluster is not None and not IDENTIFIER_RE.match(cluster):
        raise ValueError(f"ATLAS_CLICKHOUSE_CLUSTER={cluster!r} is not a valid cluster name")
    return cluster


def tenants_file() -> Path:
    return Path(os.environ.get("ATLAS_TENANTS_FILE") or PROJECT_ROOT / "tenants.yaml")


DEFAULT_LIABILITY_LOOKBACK_DAYS = 90


def liability_lookback_days() -> int:
    """ATLAS_LIABILITY_LOOKBACK_DAYS: how many days of opened bets the liability counts."""
    raw = os.environ.get("ATLAS_LIABILITY_LOOKBACK_DAYS") or str(DEFAULT_LIABILITY_LOOKBACK_DAYS)
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ValueError(f"ATLAS_LIABILITY_LOOKBACK_DAYS={raw!r} must be a positive integer")
    return int(raw)
