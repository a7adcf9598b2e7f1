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


def stale_sweep_seconds() -> int:
    """How often the stale-load sweep sensor runs (ATLAS_STALE_SWEEP_SECONDS, default 30)."""
    raw = os.environ.get("ATLAS_STALE_SWEEP_SECONDS") or "30"
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"ATLAS_STALE_SWEEP_SECONDS={raw!r} must be a positive number of seconds")
    return int(raw)


def tenants_file() -> Path:
    return Path(os.environ.get("ATLAS_TENANTS_FILE") or PROJECT_ROOT / "tenants.yaml")
