"""atlas-dagster: init-db, demo-data, load (through Dagster, newest day first) and status."""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from atlas_dagster.cli.status import add_status_command
from atlas_dagster.resources.clickhouse import ClickHouseResource, apply_schema
from atlas_dagster.settings import tenants_file
from atlas_dagster.tenants import TenantConfigError, load_tenants, tenant_by_key


def _init_db(_: argparse.Namespace) -> int:
    with ClickHouseResource().session() as client:
        print(f"applied {apply_schema(client)} statements from sql/schema")
    return 0


def _demo_data(args: argparse.Namespace) -> int:
    from atlas_dagster.demo_data import write_demo_exports

    tenants = load_tenants(tenants_file())
    tenant = tenant_by_key(tenants, args.tenant) if args.tenant else tenants[0]
    rows = write_demo_exports(tenant)
    print(f"wrote {rows} demo rows for {tenant.key} under {tenant.source}")
    return 0


def _days(start: dt.date, end: dt.date) -> list[dt.date]:
    return [end - dt.timedelta(days=i) for i in range((end - start).days + 1)]


def _load(args: argparse.Namespace) -> int:
    """Materializes the tenant's raw partitions in this process through Dagster, newest first."""
    from dagster import DagsterInstance, materialize

    from atlas_dagster.definitions import defs

    tenant = tenant_by_key(load_tenants(tenants_file()), f"{args.org}.{args.brand}")
    domains = args.domains.split(",") if args.domains else list(tenant.domains)
    start = dt.date.fromisoformat(args.start) if args.start else tenant.start_date
    end = dt.date.fromisoformat(args.end) if args.end else tenant.last_date()
    instance = DagsterInstance.get()
    assets = [defs.get_assets_def(f"tbt_raw_events_{d}") for d in domains]
    failed = 0
    for day in _days(start, end):
        for asset_def in assets:
            key = f"{day.isoformat()}|{tenant.key}"
            result = materialize(
                [asset_def],
                instance=instance,
                partition_key=key,
                resources={"clickhouse": ClickHouseResource()},
                raise_on_error=False,
            )
            state = "ok" if result.success else "FAILED"
            failed += not result.success
            print(f"{key} {asset_def.key.to_user_string()}: {state}")
    return 1 if failed else 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="atlas-dagster", description=__doc__)
    commands = root.add_subparsers(dest="command", required=True)
    commands.add_parser("init-db", help="apply sql/schema (idempotent)").set_defaults(run=_init_db)
    demo = commands.add_parser("demo-data", help="write the demo tenant's synthetic exports")
    demo.add_argument("--tenant", help="tenant key org.brand (default: the first tenant)")
    demo.set_defaults(run=_demo_data)
    load = commands.add_parser(
        "load", help="materialize a tenant's raw days in-process, newest first"
    )
    load.add_argument("--org", required=True)
    load.add_argument("--brand", required=True)
    load.add_argument("--domains")
    load.add_argument("--start")
    load.add_argument("--end")
    load.set_defaults(run=_load)
    add_status_command(commands)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except (TenantConfigError, ValueError) as exc:
        print(f"atlas-dagster: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
