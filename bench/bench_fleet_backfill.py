"""Fleet benchmark, backfill part: a fleet backfill in one action, and status/verify at fleet scale.

Run with `.venv/bin/python -m bench.bench_fleet_backfill` (`make bench BENCH=fleet`), or call
`run(...)` (bench_fleet's table takes the rows it returns). Two measurements:

1. **Fleet backfill**, on a SQLite and on a PostgreSQL Dagster instance side by side: --tenants
   tenants × --days days × 4 domains on a real `dagster dev` (fresh embedded ClickHouse). Only the
   newest --export-days days of every tenant have (tiny) exports: the measurement window covers a
   few minutes, i.e. the newest day or two of the fleet, and writing 146k Parquet day folders
   would take longer than the whole benchmark; days without exports are never reached inside the
   window. Two launches of the same range, each cancelled after --window seconds, both asset
   backfills through GraphQL launchPartitionBackfill that Dagster splits into one run per tenant,
   the first of which loads the whole fleet (run_coordinator.fleet_tags):
   * `cli --all-tenants`: `atlas-dagster backfill --all-tenants` (one range per raw asset);
   * `ui materialize`: the partition names, as the UI's Materialize… dialog sends them.
   Reported: launch command → backfill created (the CLI's own start-up included), created →
   first INSERT (insert_started_at, the pool slot held), INSERTs started in the window,
   cross-tenant inverted pairs (older day started before another tenant's newer day) and those
   the ramp-up/lanes do not explain, the most INSERTs at once vs the pool's limit, and the
   sensor ticks the daemon completed in the window (its other loops kept ticking), and the
   first run's timeline (record created, dequeued, step started). Each storage runs once with
   Dagster's per-partition planned events and once with the production switch (--planned-events).
2. **Status and verify**: --status-tenants tenants × --status-years years × 4 domains of
   backfill_log rows generated inside chDB (INSERT … SELECT FROM numbers()), and for the verified
   tenant tiny exports plus its raw rows (loaded through the inbound tables in one INSERT per
   domain); timed: `atlas-dagster status --json` over all tenants, and `atlas-dagster verify` of
   that tenant over the whole window (raw layer: 3 checks × tenant-day-domain).

Results: a table on stdout and one JSON document appended to bench-results/fleet_backfill.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.bench_backfill import wait_for_daemons
from bench.timeline import PLANNED_EVENT_MODES, leader_timeline, planned_events_env

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
ALL_DOMAINS = ("user", "casino", "transactions", "sportsbook")
LAST_DAY = dt.date(2026, 11, 30)
RAMP_DAYS = 3
FIRST_INSERT_TARGET_SECONDS = 60.0
EXPORT_ROWS = 20
VERIFY_ROWS = 2


def tenant_entries(count: int, first: dt.date, last: dt.date, source: str) -> list[dict]:
    return [
        {
            "organization_id": f"f{index:03d}",
            "brand_id": "main",
            "source": source,
            "start_date": first.isoformat(),
            "end_date": last.isoformat(),
            "domains": list(ALL_DOMAINS),
        }
        for index in range(count)
    ]


def write_exports(tenants, days: list[dt.date], rows: int) -> float:
    from atlas_dagster.cli.demo_data import GENERATORS, write_day

    started = time.monotonic()
    for tenant in tenants:
        for day in days:
            for domain in ALL_DOMAINS:
                generate, _ = GENERATORS[domain]
                data = generate(random.Random(f"{tenant.key}{domain}{day}"), tenant, day, rows)
                write_day(tenant, domain, day, data, files=1)
    return time.monotonic() - started


# --------------------------------------------------------------------------- fleet backfill


def sensor_ticks(instance, after: float, before: float) -> dict[str, dict[str, Any]]:
    """Per sensor: ticks completed in [after, before], failures and the longest tick."""
    ticks: dict[str, dict[str, Any]] = {}
    for state in instance.all_instigator_state():
        if state.instigator_type.value != "SENSOR":
            continue
        found = [
            t
            for t in instance.get_ticks(state.instigator_origin_id, state.selector_id, after=after)
            if t.timestamp <= before
        ]
        durations = [t.end_timestamp - t.timestamp for t in found if t.end_timestamp]
        ticks[state.instigator_name] = {
            "ticks": len(found),
            "failed": sum(1 for t in found if t.status.value == "FAILURE"),
            "max_seconds": round(max(durations), 2) if durations else None,
        }
    return ticks


def first_insert_logged(instance, run_ids: list[str]) -> float | None:
    """When the first INSERT started, from the runs' "INSERT started" log lines (a day's
    materialization, with its insert_started_at, only exists once the day is done)."""
    started = [
        entry.timestamp
        for run_id in run_ids
        for entry in instance.all_logs(run_id)
        if entry.dagster_event is None and entry.user_message.startswith("INSERT started")
    ]
    return min(started) if started else None


def _intervals(instance, run_ids: list[str]):
    from testkit.insert_timeline import insert_intervals

    return insert_intervals(instance, run_ids)


def launch_cli(stack, first: dt.date, last: dt.date) -> str:
    """`atlas-dagster backfill --all-tenants`; returns the backfill id."""
    done = subprocess.run(
        [
            str(VENV_BIN / "atlas-dagster"),
            "backfill",
            "--all-tenants",
            "--start",
            first.isoformat(),
            "--end",
            last.isoformat(),
            "--url",
            stack.url,
        ],
        env=stack.env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"fleet launch failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done.stdout.split("launched backfill ", 1)[1].split(":")[0]


def launch_like_the_ui(stack, keys: list[str]) -> str:
    """launchPartitionBackfill with the partition names, as the UI's Materialize… dialog."""
    from atlas_dagster.cli.dagster_api import DagsterApi

    params = {
        "partitionNames": keys,
        "assetSelection": [{"path": [f"tbt_raw_events_{d}"]} for d in ALL_DOMAINS],
        "fromFailure": False,
        "tags": [],
    }
    api = DagsterApi(stack.url, timeout=600)
    result = api.call("launch_backfill", {"params": params})["launchPartitionBackfill"]
    if result["__typename"] != "LaunchBackfillSuccess":
        raise RuntimeError(f"the backfill was refused: {result}")
    return result["backfillId"]


def backfill_run_ids(instance, backfill_id: str) -> list[str]:
    from dagster import RunsFilter

    from atlas_dagster.core.tags import BACKFILL_ID_TAG

    return [r.run_id for r in instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))]


def stop(stack, backfill_id: str) -> None:
    from atlas_dagster.cli.dagster_api import DagsterApi

    api = DagsterApi(stack.url, timeout=600)
    api.cancel_backfill(backfill_id)
    for run_id in api.unfinished_runs(backfill_id):
        with contextlib.suppress(Exception):
            api.terminate_run(run_id)


def wait_quiet(stack, timeout: float = 120.0) -> None:
    """Until no run is queued or in progress (the cancelled launch has wound down)."""
    from dagster import DagsterRunStatus, RunsFilter

    from testkit.postgres_server import stack_instance

    unfinished = [
        DagsterRunStatus.QUEUED,
        DagsterRunStatus.NOT_STARTED,
        DagsterRunStatus.STARTING,
        DagsterRunStatus.STARTED,
        DagsterRunStatus.CANCELING,
    ]
    deadline = time.monotonic() + timeout
    with stack_instance(stack) as instance:
        while instance.get_runs(RunsFilter(statuses=unfinished), limit=1):
            if time.monotonic() > deadline:
                return
            time.sleep(1)


def measure_launch(stack, kind: str, first: dt.date, last: dt.date, tenants, window: float):
    from testkit.fleet_order import inverted_pairs, unexplained_inversions
    from testkit.insert_timeline import max_overlap
    from testkit.postgres_server import stack_instance

    print(f"  {kind}: launching {first}..{last}", flush=True)
    launched_at = time.time()
    if kind == "cli --all-tenants":
        backfill_id = launch_cli(stack, first, last)
    else:
        days = [last - dt.timedelta(days=i) for i in range((last - first).days + 1)]
        backfill_id = launch_like_the_ui(stack, [f"{d}|{t.key}" for d in days for t in tenants])
    command_seconds = time.time() - launched_at
    first_insert = None
    deadline = launched_at + window
    with stack_instance(stack) as instance:
        created_at = instance.get_backfill(backfill_id).backfill_timestamp
        while time.time() < deadline:
            time.sleep(2)
            ids = backfill_run_ids(instance, backfill_id)
            if first_insert is None and ids:
                found = first_insert_logged(instance, ids)
                if found is not None:
                    first_insert = found - created_at
                    print(f"    first INSERT {first_insert:.1f}s after creation", flush=True)
        ended = time.time()
        ids = backfill_run_ids(instance, backfill_id)
        intervals = _intervals(instance, ids)
        timeline = leader_timeline(instance, ids, created_at)
        ticks = sensor_ticks(instance, launched_at, ended)
        pool = instance.event_log_storage.get_concurrency_info("atlas_insert")
    stop(stack, backfill_id)
    wait_quiet(stack)
    if first_insert is None and intervals:
        first_insert = intervals[0].started_at - created_at
    return {
        "launch": kind,
        "command_seconds": round(command_seconds, 2),
        "created_seconds": round(created_at - launched_at, 2),
        "runs": len(ids),
        "first_insert_seconds": None if first_insert is None else round(first_insert, 1),
        "first_run_timeline": timeline,
        "inserts_in_window": len(intervals),
        "tenants_started": len({i.partition_key.split("|")[1] for i in intervals}),
        "days_started": sorted({i.partition_key[:10] for i in intervals}, reverse=True)[:3],
        "inverted_pairs": inverted_pairs(intervals),
        "unexplained_inversions": len(unexplained_inversions(intervals, RAMP_DAYS)),
        "max_inserts_at_once": max_overlap(intervals),
        "pool_limit": pool.limit,
        "sensor_ticks": ticks,
        "window_seconds": round(ended - launched_at, 1),
    }


@contextlib.contextmanager
def fleet_stack(work: Path, tenants_file: Path, storage: str, planned_events: str) -> Iterator[Any]:
    from testkit.postgres_server import dagster_dev

    env = {"ATLAS_RAMP_UP_DAYS": str(RAMP_DAYS)} | planned_events_env(planned_events)
    with dagster_dev(work, tenants_file, storage, env) as st:
        wait_for_daemons(st.home, env=st.env)
        yield st


def bench_fleet_backfill(
    tenants: int,
    days: int,
    export_days: int,
    window: float,
    storages: list[str],
    launches,
    planned_events: tuple[str, ...] = PLANNED_EVENT_MODES,
) -> list[dict[str, Any]]:
    from atlas_dagster.tenants import load_tenants
    from testkit.dagster_stack import write_tenants

    first = LAST_DAY - dt.timedelta(days=days - 1)
    rows = []
    with tempfile.TemporaryDirectory(prefix="atlas-bench-fleet-") as tmp:
        work = Path(tmp)
        source = f"file://{work / 'exports'}"
        tenants_file = write_tenants(
            work / "tenants.yaml", tenant_entries(tenants, first, LAST_DAY, source)
        )
        fleet = load_tenants(tenants_file)
        export_window = [LAST_DAY - dt.timedelta(days=i) for i in range(export_days)]
        seconds = write_exports(fleet, export_window, EXPORT_ROWS)
        print(
            f"exports: {len(fleet)} tenants × {export_days} newest days × 4 domains, "
            f"{EXPORT_ROWS} rows each, {seconds:.0f}s",
            flush=True,
        )
        for storage in storages:
            for planned in planned_events:
                print(
                    f"fleet backfill on {storage}, planned events {planned}: "
                    f"{tenants} tenants × {days} days × 4 domains"
                )
                started = time.monotonic()
                stack_dir = work / f"{storage}-{planned}"
                with fleet_stack(stack_dir, tenants_file, storage, planned) as stack:
                    up = time.monotonic() - started
                    for kind in launches:
                        row = measure_launch(stack, kind, first, LAST_DAY, fleet, window)
                        rows.append(
                            {
                                "storage": storage,
                                "planned_events": planned,
                                "stack_up_seconds": round(up, 1),
                                **row,
                            }
                        )
                        print(f"    {json.dumps(rows[-1])}", flush=True)
    return rows


# --------------------------------------------------------------------------- status and verify


def generate_log_rows(client, tenants, first: dt.date, last: dt.date, skip: list[str]) -> float:
    """backfill_log of every tenant but those of `skip` (organization ids): completed days, one
    failed day in 500, and the newest 10 days of one tenant in 20 not logged (gaps)."""
    started = time.monotonic()
    days = (last - first).days + 1
    domains = "['" + "','".join(ALL_DOMAINS) + "']"
    client.command(
        f"""
        INSERT INTO atlas.backfill_log
        SELECT org, 'main', domain, day,
               if(cityHash64(org, domain, day) % 500 = 0, 'failed', 'completed') AS status,
               1000 AS rows_loaded, 1000, 2, 100000,
               if(status = 'failed', 'bench: a failed day', ''), '', '', 'bench-run', 1,
               now64(6), now64(6), '', 0, ''
        FROM (
            SELECT concat('f', leftPad(toString(intDiv(number, {days} * 4)), 3, '0')) AS org,
                   arrayElement({domains}, (number % 4) + 1) AS domain,
                   toDate({{first:Date}}) + intDiv(number % ({days} * 4), 4) AS day
            FROM numbers({len(tenants) * days * 4})
        )
        WHERE org NOT IN {{skip:Array(String)}}
          AND NOT (toUInt32(substring(org, 2)) % 20 = 1 AND day > toDate({{last:Date}}) - 10)
        """,
        parameters={"first": first, "last": last, "skip": skip},
    )
    return time.monotonic() - started


def load_verified_tenant(client, tenant, first: dt.date, last: dt.date) -> float:
    """Its exports into the raw tables in one INSERT per domain (through the inbound Null table
    and the bridge view, as a load does), then its backfill_log from the raw counts."""
    from atlas_dagster.domains import DOMAINS

    started = time.monotonic()
    root = tenant.source[len("file://") :]
    for domain in DOMAINS.values():
        columns = ", ".join(c.name for c in domain.columns)
        pattern = (
            f"{root}/{domain.name}/organization_id={tenant.organization_id}"
            f"/brand_id={tenant.brand_id}/*/*/*/*.parquet"
        )
        client.command(
            f"INSERT INTO atlas.{domain.inbound_table} ({columns}, source_file) "
            f"SELECT {columns}, _path FROM file({{pattern:String}}, 'Parquet')",
            parameters={"pattern": pattern},
        )
        client.command(
            f"""
            INSERT INTO atlas.backfill_log
            SELECT organization_id, brand_id, {{domain:String}}, event_date, 'completed',
                   count(), count(), 1, 1000, '', '', '', 'bench-run', 1, now64(6), now64(6),
                   '', 0, ''
            FROM atlas.{domain.raw_table} FINAL
            WHERE organization_id = {{org:String}} AND brand_id = {{brand:String}}
              AND event_date BETWEEN {{first:Date}} AND {{last:Date}}
            GROUP BY organization_id, brand_id, event_date
            """,
            parameters={
                "domain": domain.name,
                "org": tenant.organization_id,
                "brand": tenant.brand_id,
                "first": first,
                "last": last,
            },
        )
    return time.monotonic() - started


def timed_cli(env: dict[str, str], *args: str) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds of the command, result): the machine is shared, so the CPU
    time says what the command costs when the wall time includes waiting for a core."""
    started = time.monotonic()
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [str(VENV_BIN / "atlas-dagster"), *args],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime)
    return time.monotonic() - started, used, done


def bench_status_verify(tenants: int, years: int, verify_tenants: int = 1) -> list[dict[str, Any]]:
    """status of the fleet, then `verify --layer raw` of its first `verify_tenants` tenants one
    after the other (each with its exports and raw rows; the others have backfill_log rows
    only), and what that makes for the whole fleet at the measured mean."""
    from atlas_dagster.resources.clickhouse import ClickHouseResource
    from atlas_dagster.resources.schema import ensure_schema
    from atlas_dagster.tenants import load_tenants
    from testkit.dagster_stack import isolated_env, write_tenants

    first = LAST_DAY - dt.timedelta(days=365 * years + years // 4)  # 3 years: 1,096 days
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="atlas-bench-status-") as tmp:
        work = Path(tmp)
        source = f"file://{work / 'exports'}"
        tenants_file = write_tenants(
            work / "tenants.yaml", tenant_entries(tenants, first, LAST_DAY, source)
        )
        fleet = load_tenants(tenants_file)
        verified = fleet[:verify_tenants]
        env = isolated_env(work, tenants_file)
        days = [first + dt.timedelta(days=i) for i in range((LAST_DAY - first).days + 1)]
        export_seconds = write_exports(verified, days, VERIFY_ROWS)
        clickhouse = ClickHouseResource(dsn=env["ATLAS_CLICKHOUSE_DSN"])
        with clickhouse.session() as client:
            ensure_schema(client)
            skip = [t.organization_id for t in verified]
            log_seconds = generate_log_rows(client, fleet, first, LAST_DAY, skip)
            raw_seconds = sum(load_verified_tenant(client, t, first, LAST_DAY) for t in verified)
            log_rows = client.command("SELECT count() FROM atlas.backfill_log")
        print(
            f"status/verify data: {log_rows:,} backfill_log rows ({log_seconds:.1f}s), "
            f"{len(verified)} tenant(s) with {len(days) * 4:,} tenant-day-domains of exports "
            f"each ({export_seconds:.0f}s) and raw rows ({raw_seconds:.1f}s)",
            flush=True,
        )
        seconds, cpu, done = timed_cli(env, "status", "--json")
        report = json.loads(done.stdout) if done.returncode == 0 else {}
        rows.append(
            {
                "command": "status --json (all tenants)",
                "seconds": round(seconds, 1),
                "cpu_seconds": round(cpu, 1),
                "exit": done.returncode,
                "result": {k: len(v) for k, v in report.items()} or done.stderr[-500:],
                "backfill_log_rows": log_rows,
            }
        )
        print(f"  {rows[-1]}", flush=True)
        verify_rows = []
        for tenant in verified:
            org, brand = tenant.organization_id, tenant.brand_id
            seconds, cpu, done = timed_cli(
                env, "verify", "--org", org, "--brand", brand, "--layer", "raw"
            )
            summary = [line for line in done.stdout.splitlines() if "passed" in line]
            verify_rows.append(
                {
                    "command": f"verify {tenant.key} --layer raw ({len(days) * 4:,} day-domains)",
                    "seconds": round(seconds, 1),
                    "cpu_seconds": round(cpu, 1),
                    "exit": done.returncode,
                    "result": summary[-1] if summary else done.stderr[-500:],
                }
            )
            print(f"  {verify_rows[-1]}", flush=True)
        rows += verify_rows
        if len(verify_rows) > 1:
            mean = sum(r["seconds"] for r in verify_rows) / len(verify_rows)
            mean_cpu = sum(r["cpu_seconds"] for r in verify_rows) / len(verify_rows)
            rows.append(
                {
                    "command": f"verify of {len(verify_rows)} tenants one after the other: "
                    f"mean per tenant; x {tenants} for the whole fleet",
                    "seconds": round(mean, 1),
                    "cpu_seconds": round(mean_cpu, 1),
                    "exit": max(r["exit"] for r in verify_rows),
                    "result": f"fleet of {tenants}: {mean * tenants / 60:.1f} min wall, "
                    f"{mean_cpu * tenants / 60:.1f} min CPU at this mean",
                }
            )
            print(f"  {rows[-1]}", flush=True)
    return rows


# --------------------------------------------------------------------------- entry points


def run(
    tenants: int = 100,
    days: int = 365,
    export_days: int = 3,
    window: float = 150.0,
    storages: tuple[str, ...] = ("sqlite", "postgres"),
    launches: tuple[str, ...] = ("cli --all-tenants", "ui materialize"),
    status_tenants: int = 100,
    status_years: int = 3,
    verify_tenants: int = 1,
    backfill: bool = True,
    status: bool = True,
    planned_events: tuple[str, ...] = PLANNED_EVENT_MODES,
) -> dict[str, list[dict[str, Any]]]:
    """The rows of both tables: {"fleet_backfill": [...], "status_verify": [...]}."""
    results: dict[str, list[dict[str, Any]]] = {"fleet_backfill": [], "status_verify": []}
    if backfill:
        results["fleet_backfill"] = bench_fleet_backfill(
            tenants, days, export_days, window, list(storages), launches, planned_events
        )
    if status:
        results["status_verify"] = bench_status_verify(status_tenants, status_years, verify_tenants)
    return results


def render(results: dict[str, list[dict[str, Any]]]) -> str:
    lines = [
        "| storage | planned events | launch | launch → created (s) | runs "
        "| created → first INSERT (s) (first run: created / starting / step) "
        "| INSERTs in window "
        "| tenants started | inverted pairs (unexplained) | max INSERTs at once / pool | "
        "sensor ticks in window (failed) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["fleet_backfill"]:
        ticks = row["sensor_ticks"]
        tick_text = ", ".join(f"{n} {t['ticks']} ({t['failed']})" for n, t in sorted(ticks.items()))
        first = row["first_insert_seconds"]
        marks = row.get("first_run_timeline", {})
        timeline = " / ".join(
            str(marks.get(m, "-")) for m in ("run_created", "run_starting", "step_started")
        )
        lines.append(
            f"| {row['storage']} | {row.get('planned_events', 'per-partition')} "
            f"| {row['launch']} | {row['created_seconds']} | {row['runs']} "
            f"| {'-' if first is None else first} ({timeline}) | {row['inserts_in_window']} "
            f"| {row['tenants_started']} | {row['inverted_pairs']} "
            f"({row['unexplained_inversions']}) | {row['max_inserts_at_once']} / "
            f"{row['pool_limit']} | {tick_text} |"
        )
    if results["status_verify"]:
        lines += ["", "| command | wall s | CPU s | exit | result |", "|---|---|---|---|---|"]
        for row in results["status_verify"]:
            lines.append(
                f"| {row['command']} | {row['seconds']} | {row.get('cpu_seconds', '-')} "
                f"| {row['exit']} | {row['result']} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--export-days", type=int, default=3)
    parser.add_argument("--window", type=float, default=150.0, help="seconds per launch")
    parser.add_argument("--storages", default="sqlite,postgres")
    parser.add_argument("--launches", default="cli --all-tenants,ui materialize")
    parser.add_argument("--status-tenants", type=int, default=100)
    parser.add_argument("--status-years", type=int, default=3)
    parser.add_argument(
        "--verify-tenants",
        type=int,
        default=1,
        help="tenants verified one after the other (each gets exports and raw rows)",
    )
    parser.add_argument(
        "--planned-events",
        default=",".join(PLANNED_EVENT_MODES),
        help="comma-separated: per-partition (Dagster's default), subset (one per asset and run)",
    )
    parser.add_argument("--skip-backfill", action="store_true")
    parser.add_argument("--skip-status", action="store_true")
    args = parser.parse_args(argv)
    unknown = set(args.planned_events.split(",")) - set(PLANNED_EVENT_MODES)
    if unknown:
        parser.error(f"--planned-events: unknown {sorted(unknown)}, not in {PLANNED_EVENT_MODES}")
    started = time.monotonic()
    results = run(
        args.tenants,
        args.days,
        args.export_days,
        args.window,
        tuple(args.storages.split(",")),
        tuple(args.launches.split(",")),
        args.status_tenants,
        args.status_years,
        args.verify_tenants,
        backfill=not args.skip_backfill,
        status=not args.skip_status,
        planned_events=tuple(args.planned_events.split(",")),
    )
    print(render(results))
    out = REPO_ROOT / "bench-results" / "fleet_backfill.json"
    out.parent.mkdir(exist_ok=True)
    with out.open("a") as handle:
        record = {
            "at": dt.datetime.now(dt.UTC).isoformat(),
            "args": vars(args),
            "seconds": round(time.monotonic() - started, 1),
            **results,
        }
        handle.write(json.dumps(record, default=str) + "\n")
    print(f"results appended to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
