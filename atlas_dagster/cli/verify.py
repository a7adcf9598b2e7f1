"""atlas-dagster verify: runs the reconciliation checks through Dagster and prints them."""

from __future__ import annotations

import argparse

from dagster import AssetCheckKey, AssetKey, AssetSelection, DagsterInstance, materialize

from atlas_dagster.assets.gold import RECONCILES_RAW
from atlas_dagster.checks.raw import RAW_CHECK_NAMES
from atlas_dagster.cli.backfill import window_arguments
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.orchestration.backfill_plan import resolve_domains, resolve_window
from atlas_dagster.settings import tenants_file
from atlas_dagster.tenants import load_tenants, tenant_by_key


def run_verify(args: argparse.Namespace) -> int:
    """One check-only run over the window (the UI shows each day's results); exit 1 on failure.

    Raw domains are named by their domain (casino), gold tables by their asset key.
    """
    from atlas_dagster.definitions import build_definitions

    tenants = load_tenants(tenants_file())
    tenant = tenant_by_key(tenants, f"{args.org}.{args.brand}")
    domains = resolve_domains(tenant, args.domains.split(",") if args.domains else None)
    first, last = resolve_window(tenant, args.start, args.end)
    check_keys = []
    if args.layer in ("raw", "all"):
        check_keys += [
            AssetCheckKey(AssetKey(d.raw_table), name) for d in domains for name in RAW_CHECK_NAMES
        ]
    if args.layer in ("gold", "all"):
        names = {d.name for d in domains}
        check_keys += [
            AssetCheckKey(AssetKey(table.name), RECONCILES_RAW)
            for table in GOLD_TABLES.values()
            if names & set(table.sources)
        ]
    definitions = build_definitions()
    with DagsterInstance.get() as instance:
        result = materialize(
            list(definitions.assets or []),
            selection=AssetSelection.checks(*check_keys),
            instance=instance,
            resources=definitions.resources,  # ClickHouse as the code location wires it
            tags={
                "dagster/asset_partition_range_start": f"{first}|{tenant.key}",
                "dagster/asset_partition_range_end": f"{last}|{tenant.key}",
                "atlas/verify": tenant.key,
            },
            raise_on_error=False,
        )
    evaluations = sorted(
        result.get_asset_check_evaluations(),
        key=lambda e: (e.partition or "", e.asset_key.to_user_string(), e.check_name),
        reverse=True,
    )
    failed = [e for e in evaluations if not e.passed]
    print(f"verify {tenant.key} {first}..{last}: run {result.run_id}")
    for evaluation in evaluations:
        state = "ok  " if evaluation.passed else "FAIL"
        day = (evaluation.partition or "").split("|", 1)[0]
        asset = evaluation.asset_key.to_user_string().removeprefix("tbt_raw_events_")
        detail = "" if evaluation.passed else f"  {evaluation.description}"
        print(f"{state}  {day}  {asset:31}  {evaluation.check_name:18}{detail}")
    checked_days = len({(e.partition, e.asset_key) for e in evaluations})
    passed = len(evaluations) - len(failed)
    print(f"{passed} passed, {len(failed)} failed over {checked_days} tenant-day(s)")
    if not result.success:
        print("the check run itself failed; see the run in the Dagster UI")
        return 1
    return 1 if failed else 0


def register(commands: argparse._SubParsersAction) -> None:
    verify = commands.add_parser(
        "verify", help="run the reconciliation checks of a tenant's days through Dagster"
    )
    window_arguments(verify, selections=False)
    verify.add_argument(
        "--layer",
        choices=("raw", "gold", "all"),
        default="all",
        help="raw checks (log_completed, rows_reconcile, schema_conformance), gold's "
        "gold_reconciles_raw, or both (default)",
    )
    verify.set_defaults(run=run_verify)
