"""Dry-run benchmark: `backfill --dry-run`'s footer pass over a long window, bulk against per day.

Run with `.venv/bin/python -m bench.bench_dry_run [--days 365] [--rounds 3]`. One tenant (file
source, tiny exports: 2 rows in one file per tenant-day-domain) over --days days × 4 domains.
Timed in this process, interleaved round by round so that both sides see the same machine:

* `export_sizes(plan)`, what the dry run calls: one listing pass per domain, then the footers'
  schema per day and their statistics validated once per domain (`day_schemas`);
* the same listing, then `check_schema` of each day alone, statistics included: what the dry run
  did before `day_schemas` (one pandera validation per day).

No engine is involved: both sides read footers only. Wall seconds and milliseconds per
tenant-day-domain on stdout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

from atlas_dagster.core.days import days_between
from atlas_dagster.domains import get_domain
from atlas_dagster.exports.layout import DayExport, ExportSource
from atlas_dagster.orchestration.backfill_plan import BackfillPlan, PlannedDay, export_sizes
from atlas_dagster.tenants import Tenant
from atlas_dagster.validation.schema import ValidationError, check_schema
from bench.bench_fleet_backfill import ALL_DOMAINS, LAST_DAY, write_exports


def per_day(plan: BackfillPlan) -> int:
    """The dry run's footer pass before day_schemas: every day's check_schema alone."""
    source, refused = ExportSource(plan.tenant), 0
    for domain in plan.domains:
        days = [d.partition_date for d in plan.days if d.domain == domain]
        for day, export in source.list_window(domain.name, days).items():
            if isinstance(export, DayExport):
                try:
                    check_schema(export, domain, plan.tenant, day)
                except ValidationError:
                    refused += 1
    return refused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    first = LAST_DAY - dt.timedelta(days=args.days - 1)
    with tempfile.TemporaryDirectory() as folder:
        tenant = Tenant("dry", "main", f"file://{Path(folder)}", first, LAST_DAY, ALL_DOMAINS)
        days = days_between(first, LAST_DAY)
        write_exports([tenant], days, rows=2)
        domains = [get_domain(name) for name in ALL_DOMAINS]
        plan = BackfillPlan(tenant, domains, first, LAST_DAY)
        plan.days = [PlannedDay(d, day, "all") for day in reversed(days) for d in domains]
        timings: dict[str, list[float]] = {"export_sizes (bulk)": [], "check_schema per day": []}
        for _ in range(args.rounds):
            started = time.perf_counter()
            sizes = export_sizes(plan)
            timings["export_sizes (bulk)"].append(time.perf_counter() - started)
            assert not any(size.error for size in sizes), [s.error for s in sizes if s.error][:3]
            started = time.perf_counter()
            assert per_day(plan) == 0
            timings["check_schema per day"].append(time.perf_counter() - started)
    units = len(plan.days)
    print(f"{args.days} days x {len(ALL_DOMAINS)} domains = {units} tenant-day-domains")
    for side, seconds in timings.items():
        rounds = ", ".join(f"{s:.2f}" for s in seconds)
        median = statistics.median(seconds)
        per_unit = 1000 * median / units
        print(f"  {side:22} median {median:6.2f} s ({per_unit:5.2f} ms/unit): {rounds}")


if __name__ == "__main__":
    main()
