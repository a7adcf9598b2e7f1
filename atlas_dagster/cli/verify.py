"""atlas-dagster verify: runs the reconciliation checks through Dagster and prints them."""

from __future__ import annotations

import argparse
import datetime as dt

from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetKey,
    AssetSelection,
    DagsterEventType,
    DagsterInstance,
    materialize,
)

from atlas_dagster.assets.gold import RECONCILES_RAW
from atlas_dagster.cli.backfill import window_arguments
from atlas_dagster.core.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    VERIFY_TAG,
)
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.orchestration.backfill_plan import resolve_domains, resolve_window
from atlas_dagster.orchestration.verify_job import VERIFY_RAW_JOB
from atlas_dagster.partitions import date_of_key, newest_first_key, partition_key, tenant_of_key
from atlas_dagster.settings import current_settings
from atlas_dagster.tenants import load_tenants, tenant_by_key

# Days per gold check run. Dagster stores a planned row per partition and check at run start,
# each holding the run's whole partition subset: one run over 3 years (1,096 days × 12 checks)
# wrote 13,152 rows of 27 KB (a 380 MB index.db) in 89 s before the first check, then took 65 ms
# per evaluation (measured by bench/bench_verify.py --cli). Rows and their size both grow with
# the run's range, so runs of a bounded range keep the cost per tenant-day flat. The raw checks
# run in one verify_raw run instead, which plans none (orchestration/verify_job.py).
RUN_DAYS = 92


def run_verify(args: argparse.Namespace) -> int:
    """The raw checks of the window in one verify_raw run, the gold checks in check-only runs
    of RUN_DAYS days each, newest first (the UI shows each day's results on its partition);
    prints every result and exits 1 on a failure.

    Raw domains are named by their domain (casino), gold tables by their asset key.
    """
    from atlas_dagster.definitions import build_definitions

    tenants = load_tenants(current_settings().tenants_file)
    tenant = tenant_by_key(tenants, f"{args.org}.{args.brand}")
    domains = resolve_domains(tenant, args.domains.split(",") if args.domains else None)
    first, last = resolve_window(tenant, args.start, args.end)
    names = {d.name for d in domains}
    gold_checks = [
        AssetCheckKey(AssetKey(table.name), RECONCILES_RAW)
        for table in GOLD_TABLES.values()
        if names & set(table.sources)
    ]
    definitions = build_definitions()
    evaluations, run_ids, runs_failed = [], [], 0
    with DagsterInstance.get() as instance:
        if args.layer in ("raw", "all"):
            result = definitions.resolve_job_def(VERIFY_RAW_JOB).execute_in_process(
                run_config={
                    "ops": {
                        "verify_raw_days": {
                            "config": {
                                "tenant": tenant.key,
                                "first_day": first.isoformat(),
                                "last_day": last.isoformat(),
                                "domains": [d.name for d in domains],
                            }
                        }
                    }
                },
                instance=instance,
                tags={VERIFY_TAG: tenant.key},
                raise_on_error=False,
            )
            evaluations += stored_evaluations(instance, result.run_id)
            run_ids.append(result.run_id)
            runs_failed += not result.success
        gold = args.layer in ("gold", "all") and gold_checks
        for start, end in _ranges(first, last, RUN_DAYS) if gold else []:
            result = materialize(
                list(definitions.assets or []),
                selection=AssetSelection.checks(*gold_checks),
                instance=instance,
                resources=definitions.resources,  # ClickHouse as the code location wires it
                tags={
                    ASSET_PARTITION_RANGE_START_TAG: partition_key(start, tenant.key),
                    ASSET_PARTITION_RANGE_END_TAG: partition_key(end, tenant.key),
                    VERIFY_TAG: tenant.key,
                },
                raise_on_error=False,
            )
            evaluations += stored_evaluations(instance, result.run_id)
            run_ids.append(result.run_id)
            runs_failed += not result.success
    evaluations.sort(key=_listed_order)
    failed = [e for e in evaluations if not e.passed]
    print(f"verify {tenant.key} {first}..{last}: run(s) {', '.join(run_ids)}")
    for evaluation in evaluations:
        state = "ok  " if evaluation.passed else "FAIL"
        day = date_of_key(evaluation.partition or "") or ""
        asset = evaluation.asset_key.to_user_string().removeprefix("tbt_raw_events_")
        detail = "" if evaluation.passed else f"  {evaluation.description}"
        print(f"{state}  {day}  {asset:31}  {evaluation.check_name:18}{detail}")
    checked_days = len({(e.partition, e.asset_key) for e in evaluations})
    passed = len(evaluations) - len(failed)
    print(f"{passed} passed, {len(failed)} failed over {checked_days} tenant-day(s)")
    if runs_failed:
        print(f"{runs_failed} check run(s) failed themselves; see them in the Dagster UI")
        return 1
    return 1 if failed else 0


def stored_evaluations(instance: DagsterInstance, run_id: str) -> list[AssetCheckEvaluation]:
    """The check evaluations a run stored in the instance, as the UI shows them (the raw checks
    are stored in batches, not yielded through a step: the run's in-process result does not
    hold them)."""
    entries = instance.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
    return [e.get_dagster_event().asset_check_evaluation_data for e in entries]


def _listed_order(evaluation: AssetCheckEvaluation) -> tuple[int | str, ...]:
    """The newest day first, then tenant, asset and check (a result without a partition last)."""
    key = evaluation.partition or ""
    day = date_of_key(key) or dt.date.min
    return newest_first_key(
        day, tenant_of_key(key), evaluation.asset_key.to_user_string(), evaluation.check_name
    )


def _ranges(first: dt.date, last: dt.date, days: int) -> list[tuple[dt.date, dt.date]]:
    """[first, last] cut into ranges of at most `days` days, newest first."""
    ranges = []
    while last >= first:
        start = max(first, last - dt.timedelta(days=days - 1))
        ranges.append((start, last))
        last = start - dt.timedelta(days=1)
    return ranges


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
