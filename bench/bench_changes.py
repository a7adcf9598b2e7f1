"""Change detection benchmark: finding re-delivered days over a long window costs listings only.

Run with `.venv/bin/python -m bench.bench_changes [--days 1096] [--rows 2] [--s3]`, or
`make bench BENCH=changes`. One tenant (tiny exports: --rows rows in one file per
tenant-day-domain, 4 domains) whose every day is logged completed with the fingerprint a load
stores (taken from the export's own listing and footers). Timed, in this process, over the last
365 days and over the whole window:

* `scan_tenant`: what `status`, the client report, `--only-changed` and the re-delivery sensor
  run: the stored fingerprints (one query), one listing pass per domain, the comparison;
* the floor: the same listing alone, without atlas_dagster (`os.scandir` of the day folders, or
  one ListObjectsV2 walk of the tenant's folder per domain on S3);
* for scale, the footer re-read of the same days (`ExportSource.list_window`), what verify's
  re-read of the exports costs before any row is read.

With --s3, the same export on a SeaweedFS server on loopback (testkit/s3_server.py),
counting S3 requests by kind. Results: a table on stdout, one JSON document appended to
bench-results/changes.json.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.bench_fleet_backfill import ALL_DOMAINS, LAST_DAY, REPO_ROOT, write_exports


def _tenant(source: str, first: dt.date, last: dt.date, s3=None):
    from atlas_dagster.tenants import S3Settings, Tenant

    return Tenant("changes", "main", source, first, last, ALL_DOMAINS, s3 or S3Settings())


def seed_fingerprints(client, tenant, days: list[dt.date]) -> int:
    """A completed backfill_log row per tenant-day-domain with the fingerprint its load would
    store (the export's listing and footers), inserted in bulk."""
    from atlas_dagster.exports.layout import DayExport, ExportSource

    source = ExportSource(tenant)
    rows = []
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    for domain in ALL_DOMAINS:
        for day, export in source.list_window(domain, days).items():
            assert isinstance(export, DayExport), export
            rows.append(
                [tenant.organization_id, tenant.brand_id, domain, day, "completed",
                 export.num_rows, export.num_rows, export.fingerprint(), "bench", 1, now, now]
            )  # fmt: skip
    columns = [
        "organization_id", "brand_id", "domain", "partition_date", "status", "rows_loaded",
        "source_rows", "source_files", "run_id", "attempt", "started_at", "updated_at",
    ]  # fmt: skip
    client.insert("atlas.backfill_log", rows, column_names=columns)
    return len(rows)


def _floor_local(tenant, days: list[dt.date]) -> int:
    """Every day folder's entries and their stat, as the listing needs them."""
    from atlas_dagster.exports.layout import day_folders

    seen = 0
    for domain in ALL_DOMAINS:
        for day in days:
            for folder in day_folders(tenant, domain, day):
                with contextlib.suppress(FileNotFoundError):
                    for entry in os.scandir(folder[len("file://") :]):
                        entry.stat()
                        seen += 1
    return seen


def _floor_s3(tenant, client) -> int:
    """One ListObjectsV2 walk of the tenant's folder per domain: every key of its history."""
    from atlas_dagster.exports.layout import split_s3_uri, tenant_root

    seen = 0
    for domain in ALL_DOMAINS:
        bucket, prefix = split_s3_uri(tenant_root(tenant, domain) + "/")
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            seen += len(page.get("Contents", []))
    return seen


def _requests(source) -> collections.Counter:
    """S3 requests of `source`'s client, by operation, counted as they are sent."""
    counts: collections.Counter = collections.Counter()
    if source._client is not None:
        source._client.meta.events.register(
            "before-call.s3", lambda model, **_: counts.update([model.name])
        )
    return counts


def _timed(action) -> tuple[float, Any]:
    started = time.monotonic()
    result = action()
    return time.monotonic() - started, result


def measure(clickhouse, tenant, days: list[dt.date], s3_client=None) -> list[dict[str, Any]]:
    from atlas_dagster.checks.changes import scan_tenant
    from atlas_dagster.exports.layout import ExportSource

    units = len(days) * len(ALL_DOMAINS)
    rows = []
    source = ExportSource(tenant)
    counts = _requests(source)
    with clickhouse.session() as client:
        seconds, scan = _timed(
            lambda: scan_tenant(client, tenant, list(ALL_DOMAINS), days[0], days[-1], None, source)
        )
    assert not scan.changed and not scan.unlisted, (scan.changed[:3], scan.unlisted)
    rows.append(_row("scan_tenant (detection)", seconds, units, dict(counts)))
    if s3_client is None:
        seconds, seen = _timed(lambda: _floor_local(tenant, days))
        rows.append(_row(f"floor: scandir + stat ({seen} entries)", seconds, units, {}))
    else:
        seconds, seen = _timed(lambda: _floor_s3(tenant, s3_client))
        rows.append(_row(f"floor: ListObjectsV2 walks ({seen} keys)", seconds, units, {}))
    reread = ExportSource(tenant)
    counts = _requests(reread)
    seconds, _ = _timed(lambda: [reread.list_window(d, days) for d in ALL_DOMAINS])
    rows.append(_row("footer re-read (list_window)", seconds, units, dict(counts)))
    return rows


def _row(what: str, seconds: float, units: int, requests: dict) -> dict[str, Any]:
    return {
        "what": what,
        "seconds": round(seconds, 3),
        "ms_per_day_domain": round(1000 * seconds / units, 3),
        "s3_requests": requests,
    }


@contextlib.contextmanager
def _s3_copy(tenant, work: Path) -> Iterator[tuple[Any, Any]]:
    """The local export copied as it is to a SeaweedFS server; the tenant reading it there."""
    from atlas_dagster.tenants import S3Settings
    from testkit.s3_server import run_s3_server

    with run_s3_server() as server:
        os.environ["BENCH_CHANGES_KEY"] = server.access_key_id
        os.environ["BENCH_CHANGES_SECRET"] = server.secret_access_key
        client = server.client()
        client.create_bucket(Bucket="changes")
        root = Path(tenant.source[len("file://") :])
        for path in root.rglob("*"):
            if path.is_file():
                client.put_object(
                    Bucket="changes", Key=f"x/{path.relative_to(root)}", Body=path.read_bytes()
                )
        s3 = S3Settings(
            server.endpoint_url, server.region, "BENCH_CHANGES_KEY", "BENCH_CHANGES_SECRET"
        )
        yield _tenant("s3://changes/x", tenant.start_date, tenant.end_date, s3), client


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=1096)
    parser.add_argument("--rows", type=int, default=2)
    parser.add_argument("--s3", action="store_true", help="also on a SeaweedFS server")
    args = parser.parse_args(argv)
    from atlas_dagster.resources.clickhouse import ClickHouseResource
    from atlas_dagster.resources.schema import ensure_schema

    first = LAST_DAY - dt.timedelta(days=args.days - 1)
    days = [first + dt.timedelta(days=i) for i in range(args.days)]
    report: dict[str, Any] = {"days": args.days, "rows": args.rows, "results": {}}
    with tempfile.TemporaryDirectory(prefix="bench-changes-") as work:
        tenant = _tenant(f"file://{work}/exports", days[0], days[-1])
        write_exports([tenant], days, args.rows)
        targets = [("file", tenant, None)]
        with contextlib.ExitStack() as stack:
            if args.s3:
                s3_tenant, s3_client = stack.enter_context(_s3_copy(tenant, Path(work)))
                targets.append(("s3", s3_tenant, s3_client))
            for name, target, s3_client in targets:
                clickhouse = ClickHouseResource(dsn=f"chdb://{work}/clickhouse-{name}")
                with clickhouse.session() as client:
                    ensure_schema(client)
                    seed_fingerprints(client, target, days)
                for label, window in (("1 year", days[-365:]), (f"{args.days} days", days)):
                    rows = measure(clickhouse, target, window, s3_client)
                    report["results"][f"{name} {label}"] = rows
                    print(f"\n{name}, {label} x 4 domains ({len(window) * 4} tenant-day-domains)")
                    for row in rows:
                        print(
                            f"  {row['what']:45} {row['seconds']:8.3f} s  "
                            f"{row['ms_per_day_domain']:7.3f} ms/day-domain  {row['s3_requests']}"
                        )
    out = REPO_ROOT / "bench-results" / "changes.json"
    out.parent.mkdir(exist_ok=True)
    with out.open("a") as handle:
        handle.write(json.dumps(report | {"at": dt.datetime.now(dt.UTC).isoformat()}) + "\n")
    print(f"\nappended to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
