"""Small-day benchmark: the per-day fixed cost of the pipeline against bare per-day INSERTs.

Run with `.venv/bin/python -m bench.bench_small` (`make bench BENCH=small`). One tenant,
--days days × 4 domains × --rows rows (one Parquet file per tenant-day, bulk_exports,
reused between runs), then, in the same run, each on a fresh embedded engine with the schema
applied first:

* bare: one process runs one `INSERT INTO atlas.<domain>_events_inbound SELECT … FROM file()` per
  tenant-day-domain (newest first), through the same Null table and bridge MV, timed end to end;
* load: `atlas-dagster load` (one in-process ranged run), timed from the first day's 'running'
  row (backfill_log started_at) to the last day's 'completed' row (updated_at);
* backfill: `atlas-dagster backfill --wait` through a real `dagster dev` (webserver + daemon, the
  gold automation sensor stopped so that raw runs alone are measured), timed from the backfill's
  creation to the last 'completed' row; the daemon's pick-up (its loop sleeps 30 s) is inside.

* Dagster's event writes alone: the events a loaded tenant-day-domain leaves (a materialization
  and the three raw checks' evaluations), written for as many units through Dagster's public API
  to a fresh instance of the same storage, with no engine and no run: the share of a small day
  that is Dagster's own bookkeeping, printed per unit beside the bare per-day INSERT.
* The checks' share of the load: the run's own account of its check batches (its log line
  "checked N tenant-day-domain(s) in K batch(es): read …s, … stored in …s, …s of this thread's
  CPU": the engine reads of the log and the raw counts, then the evaluations' storage), against
  the load's window, and how long the run went on after its last 'completed' row (the last
  batch among it). With --checks-ab each repeat also runs the same load with the raw checks
  left out of the run's selection (the load as `atlas-dagster load` launches it, the checks
  deselected): the difference of the medians is what the checks cost the load.

Ratio = bare seconds / pipeline seconds for the same rows (targets: load ≥ 0.5, backfill ≥ 0.4).
Bare and load run --repeat times each (default 3), alternating which goes first, and their
medians are compared; the backfill runs once, against the bare median.
Per-phase costs come from each day's load_phases metadata (mean wall ms per tenant-day-domain),
with the Dagster events the run wrote per tenant-day-domain. JSON goes to
bench-results/small.json. --project-root runs the pipeline from another copy of the project
(e.g. an older commit, for a before/after), put first on PYTHONPATH. --storage postgres stores
the Dagster instance of load and backfill in a fresh PostgreSQL server per run (fsync on), as
production does (dagster.postgres.yaml), instead of SQLite in DAGSTER_HOME.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.bench_backfill import (
    ALL_DOMAINS,
    MB,
    bench_tenant,
    generate,
    init_db,
    launch_backfill_cli,
    stop_gold_automation,
    wait_for_daemons,
)
from bench.protocol import (
    DEFAULT_REPEAT,
    DEFAULT_SETTLE_SECONDS,
    json_worker,
    median_run,
    phases_in_order,
    settle,
    sides_in_order,
)
from bench.timeline import PLANNED_EVENT_MODES, leader_timeline, planned_events_env
from testkit.dagster_stack import write_tenants

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
LOAD_TARGET = 0.5
BACKFILL_TARGET = 0.4


def bare_worker(dsn: str, plan_path: str) -> None:
    """Per-day INSERTs through the inbound Null table and the bridge MV, newest day first."""
    import clickhouse_connect

    from atlas_dagster.domains import DOMAINS
    from atlas_dagster.resources.schema import apply_schema

    client = clickhouse_connect.get_client(dsn=dsn)
    apply_schema(client)
    plan = json.loads(Path(plan_path).read_text())
    started = time.monotonic()
    for unit in plan:
        domain = DOMAINS[unit["domain"]]
        columns = ", ".join(c.name for c in domain.columns)
        client.command(
            f"INSERT INTO atlas.{domain.inbound_table} ({columns}, source_file) "
            f"SELECT {columns}, _path FROM file({{path:String}}, 'Parquet') "
            "SETTINGS use_hive_partitioning = 0",
            parameters={"path": unit["glob"]},
        )
    seconds = time.monotonic() - started
    rows = sum(
        int(client.command(f"SELECT count() FROM atlas.{d.raw_table}")) for d in DOMAINS.values()
    )
    client.close()
    print(json.dumps({"seconds": seconds, "rows": rows, "units": len(plan)}))


def unit_plan(tenant) -> list[dict[str, str]]:
    from atlas_dagster.exports.layout import day_folder

    units, day = [], tenant.end_date
    while day >= tenant.start_date:
        for domain in tenant.domains:
            folder = day_folder(tenant, domain, day)[len("file://") :]
            units.append({"domain": domain, "glob": f"{folder}/*.parquet"})
        day -= dt.timedelta(days=1)
    return units


def run_bare(tenant, work: Path) -> dict[str, Any]:
    ch_dir = work / "bare" / "clickhouse"
    shutil.rmtree(ch_dir.parent, ignore_errors=True)
    ch_dir.parent.mkdir(parents=True)
    plan_path = ch_dir.parent / "plan.json"
    plan_path.write_text(json.dumps(unit_plan(tenant)))
    result = json_worker(
        "bench.bench_small", ["_bare", f"chdb://{ch_dir}", str(plan_path)], REPO_ROOT
    )
    shutil.rmtree(ch_dir.parent, ignore_errors=True)
    return result


def events_worker(units: str) -> None:
    """Writes `units` × (one materialization and the three raw checks' evaluations, the events a
    loaded tenant-day-domain leaves) to the instance of DAGSTER_HOME through Dagster's public API,
    and nothing else: no engine, no run. Prints their wall and CPU seconds as JSON."""
    from dagster import (
        AssetCheckEvaluation,
        AssetKey,
        AssetMaterialization,
        DagsterInstance,
        MetadataValue,
    )

    from atlas_dagster.checks.raw import RAW_CHECK_NAMES

    start, count = dt.date(2026, 1, 1), int(units)
    phases = {f"phase_{i}": 0.001 * i for i in range(14)}  # the size of a day's load_phases
    with DagsterInstance.get() as instance:
        started, cpu = time.monotonic(), time.process_time()
        for unit in range(count):
            key = AssetKey(f"tbt_raw_events_{ALL_DOMAINS[unit % len(ALL_DOMAINS)]}")
            partition = f"{start + dt.timedelta(days=unit // len(ALL_DOMAINS))}|bench.small"
            instance.report_runless_asset_event(
                AssetMaterialization(
                    asset_key=key,
                    partition=partition,
                    metadata={
                        "rows_loaded": MetadataValue.int(5_000),
                        "source_rows": MetadataValue.int(5_000),
                        "files": MetadataValue.int(1),
                        "load_phases": MetadataValue.json(phases),
                    },
                )
            )
            for name in RAW_CHECK_NAMES:
                instance.report_runless_asset_event(
                    AssetCheckEvaluation(
                        asset_key=key,
                        check_name=name,
                        passed=True,
                        partition=partition,
                        metadata={"rows": MetadataValue.int(5_000)},
                    )
                )
        wall, cpu = time.monotonic() - started, time.process_time() - cpu
    events = count * (1 + len(RAW_CHECK_NAMES))
    print(json.dumps({"units": count, "events": events, "seconds": wall, "cpu": cpu}))


def run_events_alone(units: int, work: Path, tenants_file: Path, storage: str) -> dict[str, Any]:
    """`events_worker` in its own process on a fresh instance of the bench's storage."""
    env = pipeline_env(work, "events", tenants_file, REPO_ROOT)
    with instance_storage(storage, Path(env["DAGSTER_HOME"])) as storage_env:
        return json_worker(
            "bench.bench_small", ["_events", str(units)], REPO_ROOT, env | storage_env
        )


def log_span(dsn: str) -> dict[str, Any]:
    """First 'running' → last 'completed' in backfill_log, and the day states."""
    import clickhouse_connect

    client = clickhouse_connect.get_client(dsn=dsn)
    result = client.query(
        "SELECT min(started_at), max(updated_at), countIf(status = 'completed'), count(), "
        "sumIf(rows_loaded, status = 'completed') FROM atlas.backfill_log FINAL"
    )
    first, last, completed, units, rows = result.result_rows[0]
    client.close()
    return {
        "first_running": first.timestamp(),
        "last_completed": last.timestamp(),
        "seconds": (last - first).total_seconds(),
        "completed": int(completed),
        "units": int(units),
        "rows_loaded": int(rows),
    }


# The raw run's account of its check batches (checks/batch.py BatchStats.describe).
CHECKS_LINE = re.compile(
    r"checked (\d+) tenant-day-domain\(s\) in (\d+) batch\(es\): read ([\d.]+)s, "
    r"(\d+) evaluation\(s\) stored in ([\d.]+)s, ([\d.]+)s of this thread's CPU"
)


def check_batches(logs: list[Any]) -> dict[str, Any]:
    """The runs' check batches summed (none: a project copy from before they existed), and when
    the last run ended."""
    found = {
        "days": 0,
        "batches": 0,
        "read_seconds": 0.0,
        "evaluations": 0,
        "store_seconds": 0.0,
        "cpu_seconds": 0.0,
    }
    ended = None
    for entry in logs:
        match = CHECKS_LINE.search(entry.user_message or "")
        if match and not entry.is_dagster_event:
            days, batches, read, evaluations, stored, cpu = match.groups()
            found["days"] += int(days)
            found["batches"] += int(batches)
            found["read_seconds"] += float(read)
            found["evaluations"] += int(evaluations)
            found["store_seconds"] += float(stored)
            found["cpu_seconds"] += float(cpu)
        if entry.is_dagster_event and entry.get_dagster_event().event_type_value in (
            "PIPELINE_SUCCESS",
            "PIPELINE_FAILURE",
        ):
            ended = max(ended or 0.0, entry.timestamp)
    return found | {"run_ended_at": ended}


def run_phases(home: Path, env: dict[str, str], run_ids: list[str] | None = None) -> dict[str, Any]:
    """Mean wall ms per phase per tenant-day-domain, Dagster events per unit, and the runs'
    check batches."""
    from testkit.insert_timeline import insert_intervals
    from testkit.postgres_server import instance_at

    with instance_at(home, env) as instance:
        if run_ids is None:
            run_ids = [r.run_id for r in instance.get_runs()]
        intervals = insert_intervals(instance, run_ids)
        logs = [entry for run_id in run_ids for entry in instance.all_logs(run_id)]
        events = len(logs)  # every event of the runs, for events per unit
    wall: dict[str, float] = {}
    for interval in intervals:
        for name, seconds in interval.phases.get("wall_seconds", {}).items():
            wall[name] = wall.get(name, 0.0) + seconds
    units = max(1, len(intervals))
    return {
        "units": len(intervals),
        "mean_ms": {name: 1000 * wall[name] / units for name in phases_in_order(set(wall))},
        "dagster_events_per_unit": events / units,
        "checks": check_batches(logs),
    }


def project_path(project_root: Path) -> dict[str, str]:
    """PYTHONPATH putting another copy of the project first (nothing when it is this one)."""
    if project_root == REPO_ROOT:
        return {}
    paths = [str(project_root), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(paths)}


def pipeline_env(work: Path, name: str, tenants_file: Path, project_root: Path) -> dict:
    home = work / name / "dagster_home"
    shutil.rmtree(home.parent, ignore_errors=True)
    home.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    return (
        dict(os.environ)
        | {
            "DAGSTER_HOME": str(home),
            "ATLAS_TENANTS_FILE": str(tenants_file),
            "ATLAS_CLICKHOUSE_DSN": f"chdb://{home.parent / 'clickhouse'}",
        }
        | project_path(project_root)
    )


@contextlib.contextmanager
def instance_storage(storage: str, home: Path) -> Iterator[dict[str, str]]:
    """The instance's storage for one run: the home's SQLite (nothing to add), or a fresh
    PostgreSQL server with its own fsync on, as production has it, whose connection is returned
    as environment variables (dagster.postgres.yaml reads them)."""
    if storage == "sqlite":
        yield {}
        return
    from testkit.postgres_server import postgres_instance_yaml, postgres_server

    with postgres_server(durable=True) as server:
        (home / "dagster.yaml").write_text(postgres_instance_yaml())
        yield server.env


def load_unchecked_worker(org: str, brand: str) -> None:
    """`atlas-dagster load` of the tenant's window as cli/backfill.run_load launches it (one
    in-process ranged run, the code location's resources), with the raw checks deselected."""
    from dagster import AssetSelection, DagsterInstance, materialize

    from atlas_dagster.assets.raw import raw_assets
    from atlas_dagster.cli.engine import clickhouse_resource
    from atlas_dagster.partitions import partition_key, partitions_for
    from atlas_dagster.resources.atlas_settings import RESOURCE_KEY, AtlasSettings
    from atlas_dagster.settings import current_settings
    from atlas_dagster.tenants import load_tenants, tenant_by_key

    tenants = load_tenants(current_settings().tenants_file)
    tenant = tenant_by_key(tenants, f"{org}.{brand}")
    tables = [f"tbt_raw_events_{d}" for d in tenant.domains]
    with DagsterInstance.get() as instance:
        result = materialize(
            raw_assets(tenants, partitions_for(tenants)),
            selection=AssetSelection.assets(*tables).without_checks(),
            instance=instance,
            resources={"clickhouse": clickhouse_resource(), RESOURCE_KEY: AtlasSettings.wired()},
            tags={
                "dagster/asset_partition_range_start": partition_key(tenant.start_date, tenant.key),
                "dagster/asset_partition_range_end": partition_key(tenant.end_date, tenant.key),
            },
            raise_on_error=False,
        )
    print(f"run {result.run_id}: {'success' if result.success else 'FAILED'}")
    sys.exit(0 if result.success else 1)


def run_load(
    tenant,
    work: Path,
    tenants_file: Path,
    project_root: Path,
    storage: str = "sqlite",
    checks: bool = True,
) -> dict[str, Any]:
    env = pipeline_env(work, "load", tenants_file, project_root)
    with instance_storage(storage, Path(env["DAGSTER_HOME"])) as storage_env:
        return _run_load(tenant, env | storage_env, project_root, checks)


def _run_load(
    tenant, env: dict[str, str], project_root: Path, checks: bool = True
) -> dict[str, Any]:
    init_db(env)
    command = [
        str(VENV_BIN / "atlas-dagster"),
        "load",
        "--org",
        tenant.organization_id,
        "--brand",
        tenant.brand_id,
    ]
    if not checks:
        # This file's worker (a project copy's bench/ may not have it), the pipeline from the
        # project copy first on the path.
        worker = [sys.executable, str(Path(__file__).resolve()), "_load_unchecked"]
        command = [*worker, tenant.organization_id, tenant.brand_id]
        paths = [*env.get("PYTHONPATH", "").split(os.pathsep), str(REPO_ROOT)]
        env = env | {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    started = time.monotonic()
    done = subprocess.run(
        command, env=env, cwd=project_root, capture_output=True, text=True, timeout=3600
    )
    process_seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(
            f"atlas-dagster load failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
        )
    span = log_span(env["ATLAS_CLICKHOUSE_DSN"])
    phases = run_phases(Path(env["DAGSTER_HOME"]), env)
    batches = phases["checks"]
    batches["seconds"] = batches["read_seconds"] + batches["store_seconds"]
    batches["share_of_window"] = batches["seconds"] / span["seconds"]
    if batches["run_ended_at"] is not None:
        batches["run_end_after_last_completed_s"] = batches["run_ended_at"] - span["last_completed"]
    return span | {"process_seconds": process_seconds, "phases": phases, "checks": checks}


def run_backfill(
    tenant,
    work: Path,
    tenants_file: Path,
    project_root: Path,
    planned_events: str,
    storage: str = "sqlite",
) -> dict[str, Any]:
    from testkit.postgres_server import dagster_dev, stack_instance

    stack_dir = work / "backfill"
    shutil.rmtree(stack_dir, ignore_errors=True)
    env = project_path(project_root) | planned_events_env(planned_events)
    try:
        with dagster_dev(stack_dir, tenants_file, storage, env, durable=True) as stack:
            init_db(stack.env)
            stop_gold_automation(stack.env)
            wait_for_daemons(stack.home, env=stack.env)
            backfill_id, cli_seconds = launch_backfill_cli(stack, tenant)
            with stack_instance(stack) as instance:
                created = instance.get_backfill(backfill_id).backfill_timestamp
                run_ids = [r.run_id for r in instance.get_runs()]
                timeline = leader_timeline(instance, run_ids, created)
            span = log_span(stack.env["ATLAS_CLICKHOUSE_DSN"])
            phases = run_phases(stack.home, stack.env, run_ids)
    finally:
        shutil.rmtree(stack_dir, ignore_errors=True)
    return span | {
        "backfill_id": backfill_id,
        "cli_seconds": cli_seconds,
        "created_at": created,
        "created_to_first_running_s": span["first_running"] - created,
        "first_run_timeline": timeline,
        "planned_events": planned_events,
        "seconds": span["last_completed"] - created,
        "phases": phases,
    }


def print_phases(name: str, phases: dict[str, Any]) -> None:
    print(f"\n{name}: mean wall ms per tenant-day-domain ({phases['units']} units)")
    total = 0.0
    for phase, ms in phases["mean_ms"].items():
        total += ms
        print(f"  {phase:<20} {ms:8.1f}")
    print(f"  {'(sum)':<20} {total:8.1f}")
    print(f"  Dagster events per unit: {phases['dagster_events_per_unit']:.1f}")


def measure_bare_and_load(
    args: argparse.Namespace, tenant: Any, tenants_file: Path, project_root: Path, work: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """--repeat runs of each side, each on a fresh directory, alternating which goes first."""
    bares: list[dict[str, Any]] = []
    loads: list[dict[str, Any]] = []
    for repeat in range(args.repeat):
        sides = list(sides_in_order(repeat, "bare", "load"))
        if args.checks_ab:
            sides.insert(1 + repeat % 2, "load without checks")
        for side in sides:
            runs = Path(tempfile.mkdtemp(prefix="run-", dir=work))
            settle(args.settle)
            try:
                if side == "bare":
                    print("bare per-day INSERTs ...", flush=True)
                    bares.append(run_bare(tenant, runs))
                    print(f"  {bares[-1]['units']} INSERTs in {bares[-1]['seconds']:.2f}s")
                else:
                    checks = side == "load"
                    print(f"atlas-dagster {side} ...", flush=True)
                    loads.append(
                        run_load(tenant, runs, tenants_file, project_root, args.storage, checks)
                    )
                    print(f"  first 'running' -> last 'completed' {loads[-1]['seconds']:.2f}s")
            finally:
                shutil.rmtree(runs, ignore_errors=True)
    return bares, loads


def print_checks(load: dict[str, Any], unchecked: dict[str, Any] | None) -> None:
    """The checks' share of the (median) load: their batches, and the load without them."""
    checks = load["phases"]["checks"]
    if not checks["batches"]:
        print("checks: no batch line in the run log (a project copy without batched checks)")
    else:
        print(
            f"checks: {checks['days']} tenant-day-domains in {checks['batches']} batch(es), "
            f"{checks['evaluations']} evaluations: reads {checks['read_seconds']:.2f}s + "
            f"storage {checks['store_seconds']:.2f}s = {checks['seconds']:.2f}s of wall on the "
            f"run's reporting thread, overlapping the loads ({checks['cpu_seconds']:.2f}s of "
            f"its CPU), {100 * checks['share_of_window']:.1f} % of the load window "
            f"({load['seconds']:.2f}s); the run ended "
            f"{checks.get('run_end_after_last_completed_s', 0.0):.2f}s after its last "
            "'completed' row"
        )
    if unchecked is not None:
        extra = load["seconds"] - unchecked["seconds"]
        print(
            f"the same load with the checks deselected: window {unchecked['seconds']:.2f}s "
            f"(median), process {unchecked['process_seconds']:.2f}s; with them "
            f"{load['seconds']:.2f}s, process {load['process_seconds']:.2f}s: the checks add "
            f"{extra:+.2f}s to the window ({100 * extra / unchecked['seconds']:+.1f} %)"
        )


def print_events_alone(events: dict[str, Any], bare: dict[str, Any]) -> None:
    """What Dagster's own writes of the units' events cost with nothing else running, per unit,
    beside the bare per-day INSERT: the part of a loaded day no engine setting can shorten."""
    units = events["units"]
    print(
        f"Dagster's writes of {units} units' events alone ({events['events']} events: a "
        f"materialization and 3 check evaluations each, no engine): {events['seconds']:.2f}s "
        f"wall, {events['cpu']:.2f}s CPU = {1000 * events['cpu'] / units:.1f} ms CPU a unit; "
        f"the bare per-day INSERT: {1000 * bare['seconds'] / bare['units']:.1f} ms wall a unit"
    )


def print_repeats(bares: list[dict[str, Any]], loads: list[dict[str, Any]]) -> None:
    if len(bares) < 2:
        return
    pairs = ", ".join(
        f"{b['seconds']:.2f}/{lo['seconds']:.2f} ({b['seconds'] / lo['seconds']:.2f})"
        for b, lo in zip(bares, loads, strict=True)
    )
    print(f"\nevery repeat, bare/load seconds (ratio): {pairs}")
    print(f"the table compares the medians of {len(bares)} runs of each")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_bare"]:
        bare_worker(*argv[1:3])
        return 0
    if argv[:1] == ["_events"]:
        events_worker(argv[1])
        return 0
    if argv[:1] == ["_load_unchecked"]:
        load_unchecked_worker(*argv[1:3])
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_small",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--rows", type=int, default=5_000, help="rows per day and domain")
    parser.add_argument("--start-date", default="2026-09-01")
    parser.add_argument("--skip-backfill", action="store_true", help="bare and load only")
    parser.add_argument(
        "--planned-events",
        choices=PLANNED_EVENT_MODES,
        default=PLANNED_EVENT_MODES[0],
        help="the backfill's Dagster instance: its default, one 'materialization planned' event "
        "per partition, or the production switch, one per asset and run",
    )
    parser.add_argument(
        "--storage",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="the Dagster instance's storage for load and backfill: SQLite in DAGSTER_HOME "
        "(the zero-setup default), or a fresh PostgreSQL server with fsync on per run (the "
        "production instance, dagster.postgres.yaml)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=DEFAULT_REPEAT,
        help="runs of bare and of load, alternating which goes first; the medians are "
        "compared, the backfill (once) against the bare median (default 3)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=DEFAULT_SETTLE_SECONDS,
        help="seconds of quiet (after a sync) before each run",
    )
    parser.add_argument(
        "--checks-ab",
        action="store_true",
        help="each repeat also loads with the raw checks deselected: what the checks cost",
    )
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / ".bench-work" / "small")
    parser.add_argument("--project-root", type=Path, default=REPO_ROOT)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench-results" / "small.json")
    args = parser.parse_args(argv)
    args.domains, args.rows_per_file = list(ALL_DOMAINS), args.rows
    project_root = args.project_root.resolve()

    work = args.workdir.resolve()
    tenant = bench_tenant(work / "exports", args)
    exports = generate(tenant, args)
    tenants_file = write_tenants(work / "tenants.yaml", [tenant])
    bares, runs = measure_bare_and_load(args, tenant, tenants_file, project_root, work)
    loads = [run for run in runs if run["checks"]]
    unchecked_loads = [run for run in runs if not run["checks"]]
    bare, load = median_run(bares, "seconds"), median_run(loads, "seconds")
    unchecked = median_run(unchecked_loads, "seconds") if unchecked_loads else None
    settle(args.settle)
    print("Dagster's event writes alone ...", flush=True)
    events = run_events_alone(bare["units"], work, tenants_file, args.storage)
    backfill = None
    if not args.skip_backfill:
        runs = Path(tempfile.mkdtemp(prefix="run-", dir=work))
        settle(args.settle)
        try:
            backfill = run_backfill(
                tenant, runs, tenants_file, project_root, args.planned_events, args.storage
            )
        finally:
            shutil.rmtree(runs, ignore_errors=True)

    expected = args.days * len(ALL_DOMAINS) * args.rows
    print_repeats(bares, loads)
    print(f"\n{'':<34} {'seconds':>8} {'rows':>10} {'ratio':>6} {'target':>6}")
    print(f"{'bare per-day INSERTs':<34} {bare['seconds']:>8.2f} {bare['rows']:>10,}")
    rows = [("atlas-dagster load", load, LOAD_TARGET)]
    if backfill:
        rows.append(("atlas-dagster backfill --wait", backfill, BACKFILL_TARGET))
    for name, result, target in rows:
        result["ratio"] = bare["seconds"] / result["seconds"]
        verdict = "ok" if result["ratio"] >= target else "MISS"
        print(
            f"{name:<34} {result['seconds']:>8.2f} {result['rows_loaded']:>10,} "
            f"{result['ratio']:>6.2f} {target:>6} {verdict}"
        )
        if result["rows_loaded"] != expected or result["completed"] != result["units"]:
            print(f"  !! {result['completed']}/{result['units']} completed, expected {expected}")
    print(
        "\nratio = bare seconds / pipeline seconds. load: first 'running' → last 'completed'; "
        "backfill: backfill created → last 'completed'"
    )
    if backfill:
        print(f"backfill created → first 'running': {backfill['created_to_first_running_s']:.2f}s")
        marks = ", ".join(f"{k} +{v}s" for k, v in backfill["first_run_timeline"].items())
        print(f"  its run ({backfill['planned_events']} planned events): {marks}")
    print(f"load process wall (start to exit): {load['process_seconds']:.2f}s")
    print(f"Dagster instance storage: {args.storage}")
    print_events_alone(events, bare)
    print_checks(load, unchecked)
    print_phases("atlas-dagster load", load["phases"])
    if backfill:
        print_phases("atlas-dagster backfill", backfill["phases"])
    import chdb

    document = {
        "generated_at": dt.datetime.now(dt.UTC).isoformat(),
        "machine": {"cpus": os.cpu_count(), "chdb": chdb.__version__},
        "project_root": str(project_root),
        "scale": {"days": args.days, "domains": list(ALL_DOMAINS), "rows": args.rows},
        "instance_storage": args.storage,
        "exports_mb": exports["bytes"] / MB,
        "bare": bare,
        "load": load,
        "bare_repeats": [b["seconds"] for b in bares],
        "load_repeats": [lo["seconds"] for lo in loads],
        "load_without_checks": unchecked,
        "load_without_checks_repeats": [lo["seconds"] for lo in unchecked_loads],
        "backfill": backfill,
        "dagster_events_alone": events,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2, default=str))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
