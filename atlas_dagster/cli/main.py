"""atlas-dagster: the operator's command line (backfill, load, check-export, status, report, …)."""

from __future__ import annotations

import argparse
import logging
import sys

from clickhouse_connect.driver.exceptions import Error as ClickHouseError
from dagster import DagsterInvariantViolationError

from atlas_dagster.cli import backfill, check_export, demo, report, verify
from atlas_dagster.cli.dagster_api import DagsterApiError
from atlas_dagster.cli.engine import clickhouse_resource
from atlas_dagster.cli.pause import register as register_pause
from atlas_dagster.cli.status import add_status_command
from atlas_dagster.core.waits import LOGGER as WAIT_LOGGER
from atlas_dagster.core.waits import WaitTimeout
from atlas_dagster.resources.embedded_engine import EngineOpenError
from atlas_dagster.resources.schema import apply_schema
from atlas_dagster.settings import SettingsError, current_settings
from atlas_dagster.tenants import TenantConfigError, load_tenants, tenant_by_key


def _init_db(_: argparse.Namespace) -> int:
    with clickhouse_resource().session() as client:
        print(f"applied {apply_schema(client)} statements from sql/schema")
    return 0


def _demo_data(args: argparse.Namespace) -> int:
    from atlas_dagster.cli.demo_data import write_demo_exports

    tenants = load_tenants(current_settings().tenants_file)
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
    check_export.register(commands)
    demo.register(commands)
    verify.register(commands)
    report.register(commands)
    add_status_command(commands)
    register_pause(commands)
    return root


# Problems of the operator's setup or of the target, reported in one line (no traceback).
OPERATOR_ERRORS = (
    TenantConfigError,
    DagsterApiError,
    ValueError,
    EngineOpenError,
    WaitTimeout,
    ClickHouseError,
    DagsterInvariantViolationError,
)


def _show_waits() -> logging.Handler:
    """Waits outside a Dagster run (the engine lock, a slot) go to stderr as they happen."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("atlas-dagster: %(message)s"))
    WAIT_LOGGER.addHandler(handler)
    WAIT_LOGGER.setLevel(logging.INFO)
    # The driver logs a connection failure itself; the one-line error below already says it.
    logging.getLogger("clickhouse_connect").addHandler(logging.NullHandler())
    return handler


def _check_and_sweep() -> None:
    """Before `load` starts its run: ClickHouse is opened once, so that an unreachable server or
    an unusable data directory is one line here rather than a failed run; and, since no daemon
    may be running, one stale-load sweep (the sensor's): 'running' days of dead processes
    become failed and their STARTED runs failed. (Pool slots of dead processes are freed by the
    run's own INSERT as soon as it waits for one, which it then reports.)"""
    from dagster import DagsterInstance

    from atlas_dagster.monitoring.stale_loads import sweep
    from atlas_dagster.resources.schema import ensure_schema

    with DagsterInstance.get() as instance:
        with clickhouse_resource().session() as client:
            ensure_schema(client)
            result = sweep(client, instance)
    for item in result.marked:
        print(f"atlas-dagster: {item.load.label} marked failed: {item.reason}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    try:
        current_settings()  # every ATLAS_ setting checked once, before any command runs
    except SettingsError as exc:
        print(f"atlas-dagster: {exc}", file=sys.stderr)
        return 2
    args = parser().parse_args(argv)
    handler = _show_waits()
    try:
        if args.command == "load":
            _check_and_sweep()
        return args.run(args)
    except OPERATOR_ERRORS as exc:
        text = clickhouse_resource().redact(str(exc)).strip().splitlines()
        print(f"atlas-dagster: {text[0] if text else type(exc).__name__}", file=sys.stderr)
        return 2
    finally:
        WAIT_LOGGER.removeHandler(handler)  # main() may run in-process (tests, the demo)


if __name__ == "__main__":
    sys.exit(main())
