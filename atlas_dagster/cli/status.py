"""`atlas-dagster status`: progress, failures, gaps and stale loads, as tables or as JSON."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import json
import os
import sys
from collections.abc import Iterator
from operator import itemgetter

from dagster import DagsterInstance

from atlas_dagster.cli.engine import clickhouse_resource, live_insert_limit
from atlas_dagster.cli.pause import running_loads
from atlas_dagster.core.days import day_ranges
from atlas_dagster.monitoring.status import (
    CHANGE_SCAN_TENANTS,
    GAP_WINDOW_DAYS,
    Row,
    StatusReport,
    collect,
)
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.scope import Scope
from atlas_dagster.settings import current_settings
from atlas_dagster.tenants import load_tenants

PROGRESS_COLUMNS = [
    "organization_id",
    "brand_id",
    "domain",
    "days_done",
    "days_failed",
    "total_rows",
    "first_day",
    "last_day",
    "last_activity",
    "days_left",
    "time_left_seconds",
]
FAILURE_COLUMNS = [
    "organization_id",
    "brand_id",
    "domain",
    "partition_date",
    "attempt",
    "run_id",
    "s3_path",
    "error_message",
]
STALE_COLUMNS = [
    "organization_id",
    "brand_id",
    "domain",
    "partition_date",
    "run_id",
    "worker",
    "reason",
]
GAP_COLUMNS = ["organization_id", "brand_id", "domain", "from", "to", "days"]
CHANGED_COLUMNS = ["organization_id", "brand_id", "domain", "partition_date", "reason"]


def add_status_command(commands: argparse._SubParsersAction) -> None:
    status = commands.add_parser(
        "status", help="progress, pending failures, gaps and stale loads (backfill_log FINAL)"
    )
    status.add_argument("--org", default="", help="organization_id")
    status.add_argument("--brand", default="", help="brand_id")
    status.add_argument("--domain", default="", help="one domain")
    status.add_argument(
        "--gap-days",
        type=int,
        default=GAP_WINDOW_DAYS,
        help=f"gaps: the tenant's last N days (default {GAP_WINDOW_DAYS})",
    )
    changes = status.add_mutually_exclusive_group()
    changes.add_argument(
        "--changes",
        action="store_true",
        default=None,
        help="list every tenant's export for days re-delivered since loaded (the default for "
        f"{CHANGE_SCAN_TENANTS} tenants or fewer in scope)",
    )
    changes.add_argument(
        "--no-changes", dest="changes", action="store_false", help="do not list the exports"
    )
    status.add_argument("--json", action="store_true", help="one JSON object on stdout")
    status.set_defaults(run=run_status)


@contextlib.contextmanager
def _dagster_instance() -> Iterator[DagsterInstance | None]:
    """Without an instance there is no run to ask about: an ephemeral one would know none."""
    home = os.environ.get("DAGSTER_HOME", "")
    if not home or not os.path.isdir(home):
        problem = "is not set" if not home else f"({home}) is not a directory yet"
        print(
            f"atlas-dagster: DAGSTER_HOME {problem}; stale loads are judged by worker "
            "liveness only",
            file=sys.stderr,
        )
        yield None
        return
    with DagsterInstance.get() as instance:
        yield instance


def run_status(args: argparse.Namespace) -> int:
    if args.gap_days < 1:
        raise ValueError("--gap-days must be at least 1")
    scope = Scope(args.org, args.brand, args.domain)
    tenants = load_tenants(current_settings().tenants_file)
    with _dagster_instance() as instance, clickhouse_resource().session() as client:
        ensure_schema(client)
        report = collect(
            client,
            tenants,
            scope,
            instance,
            args.gap_days,
            args.changes,
            limit=live_insert_limit(instance),
        )
        loads = running_loads(instance) if instance is not None else []
    if args.json:
        print(json.dumps(report.as_json() | {"running_loads": loads}, indent=2))
    else:
        print(render(report) + "\n\n" + _section(LOADS_HEADER, loads, LOAD_COLUMNS))
    return 0


# Each running load's effective INSERT concurrency and reason (orchestration/backpressure.py).
LOADS_HEADER = "running loads (INSERT concurrency now, of the cap: why; pause flags)"
LOAD_COLUMNS = ["run_id", "backfill", "insert_concurrency", "paused_by"]


def _cell(value: object) -> str:
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return " ".join(str(value).split())  # messages stay on one line


def table(rows: list[Row], columns: list[str]) -> str:
    cells = [columns] + [[_cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    )


def gap_ranges(gaps: list[Row]) -> list[Row]:
    """Consecutive missing days of one tenant and domain, as from..to ranges."""
    ranges: list[Row] = []
    lane = itemgetter("organization_id", "brand_id", "domain")
    for _, rows in itertools.groupby(gaps, key=lane):
        by_day = {row["partition_date"]: row for row in rows}
        for first, last in day_ranges(by_day):
            days = (last - first).days + 1
            ranges.append({**by_day[first], "from": first, "to": last, "days": days})
    return ranges


def _section(header: str, rows: list[Row], columns: list[str]) -> str:
    return f"== {header}\n" + (table(rows, columns) if rows else "(none)")


def render(report: StatusReport) -> str:
    progress, failures, gaps, stale = report.progress, report.failures, report.gaps, report.stale
    return "\n\n".join(
        [
            _section(f"progress per domain ({len(progress)})", progress, PROGRESS_COLUMNS),
            _section(f"pending failures ({len(failures)})", failures, FAILURE_COLUMNS),
            _section(
                f"gaps ({len(gaps)} days without a completed load)", gap_ranges(gaps), GAP_COLUMNS
            ),
            _section(
                f"stale loads ({len(stale)} logged 'running', no longer happening)",
                stale,
                STALE_COLUMNS,
            ),
            _changed_section(report),
        ]
    )


def _changed_section(report: StatusReport) -> str:
    if not report.changes_scanned:
        return (
            "== changed since loaded\n(not listed: more than "
            f"{CHANGE_SCAN_TENANTS} tenants in scope; pass --changes, or name a tenant)"
        )
    header = (
        f"changed since loaded ({len(report.changed)} completed days whose export has other "
        "files now; reload them with --only-changed)"
    )
    text = _section(header, report.changed, CHANGED_COLUMNS)
    return "\n".join([text, *(f"could not tell: {line}" for line in report.unlisted)])
