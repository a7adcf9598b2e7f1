"""atlas-dagster demo: the demo tenant end to end, through a real Dagster webserver and daemon."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import time
from collections.abc import Iterator

from dagster import AssetKey, DagsterInstance

from atlas_dagster import sql
from atlas_dagster.cli.backfill import wait_for
from atlas_dagster.cli.dagster_api import DagsterApi, DagsterApiError, default_url
from atlas_dagster.cli.dagster_dev import serve
from atlas_dagster.cli.demo_data import write_demo_exports
from atlas_dagster.cli.engine import clickhouse_resource
from atlas_dagster.cli.status import run_status
from atlas_dagster.core.days import days_between
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.monitoring.status import GAP_WINDOW_DAYS
from atlas_dagster.partitions import partition_key
from atlas_dagster.resources.connection import query_rows
from atlas_dagster.resources.schema import apply_schema
from atlas_dagster.scope import in_scope
from atlas_dagster.settings import current_settings
from atlas_dagster.tenants import Tenant, load_tenants

GOLD_WAIT_SECONDS = 600
DEMO_PORT = 3000


@contextlib.contextmanager
def _dagster(url: str) -> Iterator[DagsterApi]:
    """The webserver `make dev` runs if it is up, else a `dagster dev` started for the demo."""
    api = DagsterApi(url, timeout=10)
    try:
        api.call("backfill_status", {"backfillId": "none"})
        print(f"using the Dagster webserver at {url}")
        yield api
        return
    except DagsterApiError:
        pass
    log_path = current_settings().home / ".atlas" / "demo-dagster-dev.log"
    print(f"starting dagster dev (webserver + daemon) on 127.0.0.1:{DEMO_PORT}; log: {log_path}")
    with serve(dict(os.environ), log_path, port=DEMO_PORT) as stack:
        yield DagsterApi(stack.url)


def _days(tenant: Tenant) -> list[dt.date]:
    return days_between(tenant.start_date, tenant.last_date())


def _gold_progress(instance: DagsterInstance, tenant: Tenant) -> tuple[int, int]:
    done = expected = 0
    for table in GOLD_TABLES.values():
        days = [d for d in _days(tenant) if in_scope(tenant, table.sources, d)]
        keys = {partition_key(d, tenant.key) for d in days}
        expected += len(keys)
        done += len(keys & instance.get_materialized_partitions(AssetKey(table.name)))
    return done, expected


def _wait_for_gold(tenant: Tenant) -> bool:
    """Gold fills in by itself: the automation sensor requests it as raw days land."""
    deadline = time.monotonic() + GOLD_WAIT_SECONDS
    with DagsterInstance.get() as instance:
        last_seen = None
        while time.monotonic() < deadline:
            done, expected = _gold_progress(instance, tenant)
            if (done, expected) != last_seen:
                print(f"gold tenant-days materialized by automation: {done}/{expected}", flush=True)
                last_seen = (done, expected)
            if done == expected:
                return True
            time.sleep(3)
    return False


def _print_gold(tenant: Tenant) -> None:
    since = tenant.last_date() - dt.timedelta(days=1)
    parameters = {
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "since": since,
    }
    with clickhouse_resource().session() as client:
        rows = query_rows(client, sql.query("demo_gold_summary"), parameters)
    print(f"\natlas.gold_ggr_daily FINAL, {tenant.key}, from {since}:")
    columns = ["day", "vertical", "currency", "bets", "turnover", "payouts", "ggr"]
    print("  ".join(f"{c:>12}" for c in columns))
    for row in rows:
        print("  ".join(f"{str(row[c]):>12}" for c in columns))


def run_demo(args: argparse.Namespace) -> int:
    tenant = load_tenants(current_settings().tenants_file)[0]
    print(f"writing demo exports for {tenant.key}: {write_demo_exports(tenant)} rows")
    with clickhouse_resource().session() as client:
        print(f"applied {apply_schema(client)} statements from sql/schema")
    with _dagster(args.url) as api:
        selection = {
            f"tbt_raw_events_{domain}": [
                (
                    partition_key(tenant.start_date, tenant.key),
                    partition_key(tenant.last_date(), tenant.key),
                )
            ]
            for domain in tenant.domains
        }
        backfill_id = api.launch_backfill(selection, f"demo {tenant.key}", {})
        print(f"launched backfill {backfill_id}: {api.url}/runs/b/{backfill_id} (newest day first)")
        raw_ok = wait_for(api, backfill_id, current_settings().backfill_wait_seconds) == 0
        gold_ok = _wait_for_gold(tenant)
    status = argparse.Namespace(
        org=tenant.organization_id,
        brand=tenant.brand_id,
        domain="",
        gap_days=GAP_WINDOW_DAYS,
        json=False,
    )
    run_status(status)  # the command line's own status command
    _print_gold(tenant)
    print("\nexplore it in the UI with `make dev` (http://127.0.0.1:3000)")
    return 0 if raw_ok and gold_ok else 1


def register(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo",
        help="demo exports, schema, a raw backfill through Dagster, gold by automation, status",
    )
    demo.add_argument("--url", default=default_url(), help="a running webserver to reuse")
    demo.set_defaults(run=run_demo)
