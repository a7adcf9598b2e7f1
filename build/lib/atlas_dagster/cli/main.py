"""atlas-dagster: the operator's command line (init-db, demo-data, backfill, load, status)."""

from __future__ import annotations

import argparse
import sys

from atlas_dagster.cli import backfill, demo, verify
from atlas_dagster.cli.dagster_api import DagsterApiError
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


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="atlas-dagster", description=__doc__)
    commands = root.add_subparsers(dest="command", required=True)
    commands.add_parser("init-db", help="apply sql/schema (idempotent)").set_defaults(run=_init_db)
    demo_data = commands.add_parser("demo-data", help="write the demo tenant's synthetic exports")
    demo_data.add_argument("--tenant", help="tenant key org.brand (default: the first tenant)")
    demo_data.set_defaults(run=_demo_data)
    backfill.register(commands)
    demo.register(commands)
    verify.register(commands)
    add_status_command(commands)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except (TenantConfigError, DagsterApiError, ValueError) as exc:
        print(f"atlas-dagster: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
