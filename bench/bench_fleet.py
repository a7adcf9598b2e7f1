"""Fleet benchmark: the control plane at N tenants x 3 years x 4 domains, on the real daemon.

Run with `.venv/bin/python -m bench.bench_fleet` (`make bench BENCH=fleet`). For each --tenants
size N (default 40,100,200):

* writes a tenants.yaml of N tenants, 2023-12-01..2026-11-30, all four domains (1,096 days, so
  N x 1,096 partitions per asset); no exports: nothing here reads raw data;
* times the code location load (a fresh interpreter importing atlas_dagster.definitions and
  resolving its asset graph and jobs);
* fills backfill_log with the whole history 'completed' (N x 1,096 x 4 rows, generated inside
  the engine by bench/sql/seed_backfill_log.sql), so the stale sweep reads a fleet-sized log;
* starts `dagster-daemon run` on a fresh SQLite instance and embedded ClickHouse, with every
  sensor of the project running (gold automation and stale sweep every --interval seconds,
  queue release every 15 s, run-status sensors at Dagster's default 30 s). The instance queues
  runs but never starts them (max_concurrent_runs 0): a gold request is a queued run, counted
  and timed without replaying anything;
* idle: waits --idle-ticks automation ticks with nothing to do;
* landing: one tenant's year of raw lands newest day first, 4 domains x 365 days = 1,460
  materializations spread over --land-seconds, reported through the public
  `instance.report_runless_asset_event`. This is what the automation and the sensors read of a
  real load: a raw run's day ends in the same ASSET_MATERIALIZATION event (asset key, date|tenant
  partition) in the same event log, and the gold condition reads nothing else of it; what it
  leaves out is the raw run itself, whose in-progress state only delays gold (the tests cover
  that path), and ClickHouse work, which no sensor does;
* reads every sensor tick (start, end) from the instance and every queued gold run: ticks from
  a tenant-day's raw being complete to its gold request, and whether any gold tenant-day was
  requested twice.

--reference repeats the run at one size with stock `AutomationCondition.eager()` on the same
graph (bench/fleet_eager_definitions.py) for a side-by-side. Results: a table on stdout and one
JSON document appended to bench-results/fleet.json.

Hook for the fleet backfill/status/verify measurements (helper "fleet"): a module
`bench.bench_fleet_backfill` exposing `measure(setup: FleetSetup) -> dict[str, object]` is called
for every size after the sensor phases, with the daemon stopped; its rows join the report.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench-results" / "fleet.json"
START, END = dt.date(2023, 12, 1), dt.date(2026, 11, 30)
GOLD_SENSOR = "gold_after_raw"
EAGER_MODULE = "bench.fleet_eager_definitions"


@dataclass
class FleetSetup:
    """One size's fresh environment; what the fleet backfill hook receives."""

    tenants: int
    root: Path
    tenants_file: Path
    env: dict[str, str]
    tenant_keys: list[str] = field(default_factory=list)


def write_tenants(path: Path, count: int) -> list[str]:
    tenants = [
        {
            "organization_id": f"org{i:03d}",
            "brand_id": "main",
            "source": f"file://{path.parent}/exports/org{i:03d}",
            "start_date": START.isoformat(),
            "end_date": END.isoformat(),
        }
        for i in range(count)
    ]
    path.write_text(yaml.safe_dump({"tenants": tenants}))
    return [f"{t['organization_id']}.{t['brand_id']}" for t in tenants]


def setup(count: int, base: Path, interval: int) -> FleetSetup:
    root = base / f"n{count}"
    home = root / "dagster_home"
    home.mkdir(parents=True)
    config = yaml.safe_load((REPO / "dagster.yaml").read_text())
    # Gold requests stay queued: counted and timed, never replayed (no exports to replay).
    config["run_coordinator"]["config"]["max_concurrent_runs"] = 0
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    tenants_file = root / "tenants.yaml"
    keys = write_tenants(tenants_file, count)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "ATLAS_TENANTS_FILE": str(tenants_file),
        "ATLAS_CLICKHOUSE_DSN": f"chdb://{root / 'clickhouse'}",
        "ATLAS_AUTOMATION_SECONDS": str(interval),
        "ATLAS_STALE_SWEEP_SECONDS": str(interval),
    }
    return FleetSetup(count, root, tenants_file, env, keys)


def seed_backfill_log(fleet: FleetSetup) -> int:
    """The full history 'completed' in backfill_log, so the stale sweep reads a fleet's log."""
    from atlas_dagster.resources.clickhouse import ClickHouseResource
    from atlas_dagster.resources.schema import ensure_schema

    days = (END - START).days + 1
    text = (REPO / "bench" / "sql" / "seed_backfill_log.sql").read_text()
    with ClickHouseResource(dsn=fleet.env["ATLAS_CLICKHOUSE_DSN"]).session() as client:
        ensure_schema(client)
        client.command(text, parameters={"tenants": fleet.tenants, "days": days, "start": START})
        return int(client.command("SELECT count() FROM atlas.backfill_log"))


def code_location_load(fleet: FleetSetup, module: str) -> tuple[float, float]:
    """Seconds for a fresh interpreter to import the code location (what a code server pays on
    start and on "Reload definitions"), and for building the definitions again once imported
    (the part that grows with the fleet)."""
    probe = (
        "import time, importlib; t = time.perf_counter(); "
        f"m = importlib.import_module({module!r}); m.defs.resolve_asset_graph(); "
        "total = time.perf_counter() - t; "
        "from atlas_dagster.definitions import build_definitions; t = time.perf_counter(); "
        "build_definitions().resolve_asset_graph(); print(total, time.perf_counter() - t)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env=fleet.env,
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    )
    total, build = out.stdout.strip().splitlines()[-1].split()
    return float(total), float(build)


def workspace(fleet: FleetSetup, module: str) -> Path:
    path = fleet.root / "workspace.yaml"
    entry = {"python_module": {"module_name": module, "working_directory": str(REPO)}}
    path.write_text(yaml.safe_dump({"load_from": [entry]}))
    return path


def start_daemon(fleet: FleetSetup, module: str) -> subprocess.Popen:
    daemon = REPO / ".venv" / "bin" / "dagster-daemon"
    log = (fleet.root / "daemon.log").open("w")
    return subprocess.Popen(
        [str(daemon), "run", "-w", str(workspace(fleet, module))],
        env=fleet.env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def sensor_ticks(instance) -> dict[str, list[tuple[float, float, str]]]:
    """(start, end, status) of every finished tick, by sensor name."""
    ticks: dict[str, list[tuple[float, float, str]]] = {}
    for state in instance.all_instigator_state():
        rows = instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=10_000)
        ticks[state.instigator_name] = sorted(
            (t.timestamp, t.end_timestamp, t.status.value) for t in rows if t.end_timestamp
        )
    return ticks


def wait_ticks(instance, name: str, after: float, count: int, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        done = [t for t in sensor_ticks(instance).get(name, []) if t[0] >= after]
        if len(done) >= count:
            return
        time.sleep(1)
    raise TimeoutError(f"sensor {name}: fewer than {count} ticks in {timeout:.0f} s")


def land_year(instance, tenant: str, seconds: float) -> dict[dt.date, float]:
    """1,460 raw materializations newest day first; returns when each day became complete."""
    from dagster import AssetMaterialization

    from atlas_dagster.domains import DOMAINS
    from atlas_dagster.partitions import TenantDay

    days = [END - dt.timedelta(days=n) for n in range(365)]
    complete: dict[dt.date, float] = {}
    pause = seconds / len(days)
    for day in days:
        key = TenantDay(day, tenant).partition_key
        for domain in DOMAINS.values():
            event = AssetMaterialization(domain.raw_table, partition=key)
            instance.report_runless_asset_event(event)
        complete[day] = time.time()
        time.sleep(pause)
    return complete


def gold_requests(instance) -> list[tuple[str, str, float]]:
    """(gold asset, partition, requested at) of every gold request: the automation sensor
    emits a backfill when a tick requests several partitions, a run when it requests one."""
    from dagster import RunsFilter

    from atlas_dagster.core.tags import BACKFILL_ID_TAG
    from atlas_dagster.dagster_internals import backfill_target_partitions
    from atlas_dagster.gold.tables import GOLD_TABLES

    rows = []
    for backfill in instance.get_backfills():
        targets = backfill_target_partitions(instance, backfill.backfill_id) or {}
        for key, subset in targets.items():
            if key.to_user_string() in GOLD_TABLES:
                rows += [
                    (key.to_user_string(), str(partition), backfill.backfill_timestamp)
                    for partition in subset.get_partition_keys()
                ]
    for record in instance.get_run_records(RunsFilter()):
        run = record.dagster_run
        if BACKFILL_ID_TAG in run.tags or "dagster/partition" not in run.tags:
            continue
        for key in run.asset_selection or ():
            if key.to_user_string() in GOLD_TABLES:
                created = record.create_timestamp.timestamp()
                rows.append((key.to_user_string(), run.tags["dagster/partition"], created))
    return rows


def ready_time(asset: str, day: dt.date, complete: dict[dt.date, float], lookback: int) -> float:
    if asset != "gold_sportsbook_liability_daily":
        return complete[day]
    window = [day - dt.timedelta(days=n) for n in range(lookback)]
    return max(complete.get(d, float("inf")) for d in window if d >= START)


def latency_ticks(
    requests: list[tuple[str, str, float]],
    complete: dict[dt.date, float],
    automation: list[tuple[float, float, str]],
    lookback: int,
) -> list[int]:
    """Per requested tenant-day: automation ticks that ended after its raw was complete and
    started before its request (1 = the first tick that could see it)."""
    from atlas_dagster.partitions import split_key

    out = []
    for asset, partition, created in requests:
        day, _ = split_key(partition)
        ready = ready_time(asset, day, complete, lookback)
        out.append(sum(1 for start, end, _ in automation if end >= ready and start <= created))
    return out


def stats(ticks: list[tuple[float, float, str]]) -> dict[str, Any]:
    seconds = [end - start for start, end, _ in ticks]
    if not seconds:
        return {"ticks": 0}
    failed = sum(1 for *_, status in ticks if status == "FAILURE")
    return {
        "ticks": len(seconds),
        "median_s": round(statistics.median(seconds), 2),
        "max_s": round(max(seconds), 2),
        "failed": failed,
    }


def run_size(count: int, base: Path, args: argparse.Namespace, module: str) -> dict[str, Any]:
    from dagster import DagsterInstance

    from atlas_dagster.partitions import split_key

    fleet = setup(count, base, args.interval)
    result: dict[str, Any] = {"tenants": count, "partitions_per_asset": count * 1096}
    result["backfill_log_rows"] = seed_backfill_log(fleet)
    load, build = code_location_load(fleet, module)
    result["code_location_load_s"], result["definitions_build_s"] = round(load, 2), round(build, 2)
    os.environ.update(fleet.env)
    instance = DagsterInstance.get()
    daemon = start_daemon(fleet, module)
    landing = ended = float("inf")
    complete: dict[dt.date, float] = {}
    try:
        wait_ticks(instance, GOLD_SENSOR, time.time(), args.idle_ticks, args.timeout)
        landing = time.time()
        complete = land_year(instance, fleet.tenant_keys[0], args.land_seconds)
        wait_ticks(instance, GOLD_SENSOR, time.time(), 3, args.timeout)
    except TimeoutError as exc:  # a finding, not a crash: the ticks so far are reported
        result["timed_out"] = str(exc)
    finally:
        ended = time.time()
        stop(daemon)
    ticks = sensor_ticks(instance)
    result["idle"] = {n: stats([t for t in v if t[0] < landing]) for n, v in ticks.items()}
    result["landing"] = {
        n: stats([t for t in v if landing <= t[0] <= ended]) for n, v in ticks.items()
    }
    requests = gold_requests(instance)
    keys = [(asset, partition) for asset, partition, _ in requests]
    lookback = int(fleet.env.get("ATLAS_LIABILITY_LOOKBACK_DAYS", "90"))
    landed = [r for r in requests if split_key(r[1])[0] in complete]
    lat = latency_ticks(landed, complete, ticks.get(GOLD_SENSOR, []), lookback)
    result["gold"] = {
        "requested": len(keys),
        "requested_twice": len(keys) - len(set(keys)),
        "twice_examples": sorted(k for k in set(keys) if keys.count(k) > 1)[:5],
        "max_ticks_to_request": max(lat, default=None),
        "by_asset": {a: sum(1 for k in keys if k[0] == a) for a in sorted({k[0] for k in keys})},
    }
    instance.dispose()
    return result


def table(results: list[dict[str, Any]]) -> str:
    sensors = sorted({name for r in results for name in r["idle"]})
    head = "| | " + " | ".join(f"{r['label']}" for r in results) + " |"
    lines = [head, "|---" * (len(results) + 1) + "|"]

    def row(name: str, cell: Callable[[dict[str, Any]], str]) -> None:
        lines.append(f"| {name} | " + " | ".join(cell(r) for r in results) + " |")

    row("partitions per asset", lambda r: f"{r['partitions_per_asset']:,}")
    row("backfill_log rows", lambda r: f"{r['backfill_log_rows']:,}")
    row(
        "code location load (of which definitions)",
        lambda r: f"{r['code_location_load_s']} s ({r['definitions_build_s']} s)",
    )
    for phase in ("idle", "landing"):
        for name in sensors:

            def cell(r: dict[str, Any], phase: str = phase, name: str = name) -> str:
                s = r[phase].get(name, {"ticks": 0})
                if not s["ticks"]:
                    return "no tick"
                failed = f", {s['failed']} failed" if s["failed"] else ""
                return f"{s['median_s']} / {s['max_s']} s ({s['ticks']}{failed})"

            row(f"{name}, {phase}: median / max (ticks)", cell)
    row("phase timed out", lambda r: r.get("timed_out", "no"))
    row("gold tenant-days requested", lambda r: str(r["gold"]["requested"]))
    row("… requested twice", lambda r: str(r["gold"]["requested_twice"]))
    row(
        "ticks from raw complete to gold request (max)",
        lambda r: str(r["gold"]["max_ticks_to_request"]),
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tenants", default="40,100,200", help="comma-separated fleet sizes")
    parser.add_argument("--interval", type=int, default=10, help="automation/sweep seconds")
    parser.add_argument("--idle-ticks", type=int, default=4)
    parser.add_argument("--land-seconds", type=float, default=40.0)
    parser.add_argument("--timeout", type=float, default=240.0, help="per phase, seconds")
    parser.add_argument(
        "--reference",
        type=int,
        default=100,
        help="fleet size for the stock AutomationCondition.eager() side-by-side (0: none)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the instances for a look")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="atlas-sensors-fleet-"))
    results = []
    try:
        for count in (int(n) for n in args.tenants.split(",")):
            print(f"fleet: {count} tenants ...", flush=True)
            result = run_size(count, base, args, "atlas_dagster.definitions")
            results.append({**result, "label": f"{count} tenants"})
            print(json.dumps(results[-1]), flush=True)
        if args.reference:
            print(f"fleet: {args.reference} tenants, stock eager() ...", flush=True)
            result = run_size(args.reference, base / "eager", args, EAGER_MODULE)
            results.append({**result, "label": f"{args.reference} tenants, stock eager()"})
            print(json.dumps(results[-1]), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(table(results))
    print(json.dumps([r["gold"] for r in results]))
    RESULTS.parent.mkdir(exist_ok=True)
    with RESULTS.open("a") as out:
        document = {"at": dt.datetime.now(dt.UTC).isoformat(), "args": vars(args)}
        out.write(json.dumps({**document, "results": results}) + "\n")


if __name__ == "__main__":
    main()
