"""Report benchmark: every client's progress report at fleet size, from a few grouped queries.

Run with `.venv/bin/python -m bench.bench_report [--tenants 100] [--years 3] [--repeat 3]`.

In a fresh embedded ClickHouse directory it seeds backfill_log with N tenants x 3 years x 4
domains (bench/sql/seed_report_log.sql: completed, failed with the loader's row diagnosis, no
files, running, never tried) and the oldest two years of every gold table
(bench/sql/seed_report_gold.sql), all with INSERT ... SELECT FROM numbers() inside the engine.
Then, --repeat times, it produces every tenant's report as the scheduled asset run does
(reporting.collect.read_fleet: the grouped queries, one engine session; build_report per tenant;
HTML, JSON and CSV written per tenant to a local folder) and times each phase; and once one
tenant's report alone (what `atlas-dagster report` pays on the same log). Prints the medians and
appends one JSON document to bench-results/report.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from atlas_dagster.gold.tables import GOLD_TABLES, identifier
from atlas_dagster.reporting.collect import build_report, collect_reports, read_fleet
from atlas_dagster.reporting.publish import publish, tenant_folder
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.tenants import Tenant

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench-results" / "report.json"
DOMAINS = ("user", "casino", "transactions", "sportsbook")


def fleet(count: int, start: dt.date, end: dt.date) -> list[Tenant]:
    return [
        Tenant(f"org{i:03d}", "main", f"file:///bench/exports/org{i:03d}", start, end, DOMAINS)
        for i in range(count)
    ]


def seed(clickhouse: ClickHouseResource, tenants: int, start: dt.date, days: int) -> dict:
    began = time.perf_counter()
    with clickhouse.session() as client:
        ensure_schema(client)
        text = (REPO / "bench" / "sql" / "seed_report_log.sql").read_text()
        client.command(text, parameters={"tenants": tenants, "days": days, "start": start})
        gold = (REPO / "bench" / "sql" / "seed_report_gold.sql").read_text()
        for table in GOLD_TABLES.values():
            client.command(
                gold.replace("$gold_table", identifier(table.name)),
                parameters={"tenants": tenants, "gold_days": days * 2 // 3, "start": start},
            )
        log_rows = int(client.command("SELECT count() FROM atlas.backfill_log"))
    return {"seed_seconds": time.perf_counter() - began, "backfill_log_rows": log_rows}


def one_round(clickhouse: ClickHouseResource, tenants: list[Tenant], out: Path, today: dt.date):
    timings: dict[str, float] = {}
    began = time.perf_counter()
    with clickhouse.session() as client:
        opened = time.perf_counter()
        rows = read_fleet(client, tenants, today)
        timings["queries"] = time.perf_counter() - opened
    timings["engine_open"] = opened - began
    built = time.perf_counter()
    reports = [build_report(t, rows, today, 1) for t in tenants]
    timings["build"] = time.perf_counter() - built
    written = time.perf_counter()
    sizes = []
    for report, tenant in zip(reports, tenants, strict=True):
        published = publish(report, tenant, tenant_folder(str(out), tenant))
        sizes.append(Path(published.html).stat().st_size)
    timings["render_and_write"] = time.perf_counter() - written
    timings["total"] = time.perf_counter() - began
    return timings, reports, sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--years", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    today = dt.date(2026, 12, 1)
    days = 365 * args.years
    start = today - dt.timedelta(days=days)
    tenants = fleet(args.tenants, start, today - dt.timedelta(days=1))
    work = Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        clickhouse = ClickHouseResource(dsn=f"chdb://{work / 'clickhouse'}")
        result: dict[str, object] = {
            "tenants": args.tenants,
            "days": days,
            "domains": len(DOMAINS),
            **seed(clickhouse, args.tenants, start, days),
        }
        rounds = []
        for _ in range(args.repeat):
            timings, reports, sizes = one_round(clickhouse, tenants, work / "reports", today)
            rounds.append(timings)
        medians = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        single = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            collect_reports(clickhouse, tenants[len(tenants) // 2 : len(tenants) // 2 + 1], today)
            single.append(time.perf_counter() - began)
        result |= {
            "median_seconds": medians,
            "rounds": rounds,
            "one_tenant_seconds": statistics.median(single),
            "html_bytes_median": statistics.median(sizes),
            "failures_listed": sum(len(r.failures) for r in reports),
            "percent_complete_first": round(reports[0].percent, 1),
            "measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"{args.tenants} tenants x {days} days x {len(DOMAINS)} domains: "
        f"{result['backfill_log_rows']:,} backfill_log rows seeded in {result['seed_seconds']:.1f}s"
    )
    print(f"every report, median of {args.repeat}:")
    for name, seconds in medians.items():
        print(f"  {name:<18}{seconds:8.3f} s")
    print(f"one tenant's report alone (collect only): {result['one_tenant_seconds']:.3f} s")
    print(f"an HTML page: {result['html_bytes_median'] / 1024:.0f} KiB (median)")
    RESULTS.parent.mkdir(exist_ok=True)
    with RESULTS.open("a") as handle:
        handle.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
