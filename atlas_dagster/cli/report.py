"""`atlas-dagster report`: one tenant's progress report (HTML, JSON, CSV) written now."""

from __future__ import annotations

import argparse

from atlas_dagster.cli.engine import clickhouse_resource, live_insert_limit
from atlas_dagster.reporting.collect import collect_reports
from atlas_dagster.reporting.publish import publish, tenant_folder
from atlas_dagster.reporting.render import duration
from atlas_dagster.settings import current_settings
from atlas_dagster.tenants import load_tenants, tenant_by_key


def register(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser(
        "report", help="write a tenant's progress report (progress.html, .json, .csv)"
    )
    report.add_argument("--org", required=True, help="organization_id")
    report.add_argument("--brand", required=True, help="brand_id")
    report.add_argument(
        "--out",
        default="",
        help="a folder or s3://bucket/prefix for the three files (default: the tenant's "
        "folder under ATLAS_REPORTS_LOCATION)",
    )
    report.set_defaults(run=run_report)


def run_report(args: argparse.Namespace) -> int:
    settings = current_settings()
    tenant = tenant_by_key(load_tenants(settings.tenants_file), f"{args.org}.{args.brand}")
    folder = args.out.rstrip("/") or tenant_folder(settings.reports_location, tenant)
    [report] = collect_reports(clickhouse_resource(), [tenant], limit=live_insert_limit())
    published = publish(report, tenant, folder)
    failed = sum(d.failed for d in report.domains)
    print(
        f"{tenant.key}: {report.percent:.1f}% of {report.expected_days} day-domains loaded, "
        f"{failed} failed, loading left: {duration(report.eta_seconds)}"
    )
    for name in published.files:
        print(f"wrote {published.folder}/{name}")
    return 0
