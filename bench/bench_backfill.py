"""Orchestration benchmark: a whole backfill and single-day runs on a real `dagster dev`.

Run with `.venv/bin/python -m bench.bench_backfill` (part of `make bench`). On one tenant:

* writes --days × --domains export days of --rows rows (testkit.bulk_exports), once: a
  marker file per day folder lets later runs reuse them;
* starts the Dagster webserver and daemon (`dagster dev`, testkit.dagster_stack) on
  a fresh instance and a fresh embedded ClickHouse (schema applied first, as `init-db` does);
* launches the backfill with `atlas-dagster backfill --wait` (one ranged run per tenant, as the
  project's backfill policy makes it), then --single-runs single-partition backfills through
  GraphQL, one after another, each launched once the previous one's run has finished (these
  re-load days the backfill loaded, unless --skip-backfill);
* reads back from the Dagster instance: every run's events (RUN_ENQUEUED, RUN_STARTING,
  RUN_START, STEP_START) and every day's materialization metadata (insert_started_at /
  insert_finished_at: when the day held its pool slot; insert_seconds: the INSERT statement;
  load_phases: wall and CPU seconds per phase);
* polls /proc for the RSS of every process under `dagster dev`; a run's worker is the pid its
  run logged ("Started process for run (pid: N)").

Launch -> INSERT start is measured from the run's RUN_STARTING event (written when the daemon
hands the dequeued run to the run launcher) to its first day's insert_started_at (pool slot held,
the INSERT's engine session about to open), and also to that day's INSERT statement (slot held +
the session phases before the statement, from load_phases). Results: tables on stdout, and one
JSON document appended to bench-results/backfill.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from bench.bench_load import _children_map, _rss_bytes
from bench.protocol import phases_in_order

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
ORG, BRAND = "bench", "main"
ALL_DOMAINS = ("user", "casino", "transactions", "sportsbook")
MB = 1024 * 1024
LAUNCH_TARGET_SECONDS = 3.5
WALL_RATIO_TARGET = 1.5
BACKFILL_TIMEOUT_SECONDS = 4 * 3600
SINGLE_RUN_TIMEOUT_SECONDS = 900
DAEMONS_NEEDED = ("BACKFILL", "QUEUED_RUN_COORDINATOR", "SENSOR")
REFERENCE_ISSUE = (
    "reference (issue), stock Dagster, not measured here: a run's launch -> step start ~6 s "
    "with the multiprocess executor, ~3.3 s in-process; the daemon launches ~1 run per 3 s"
)
# Session phases of a day that run after its slot is held and before its INSERT statement.
PHASES_BEFORE_INSERT = (
    "engine_lock_wait",
    "engine_open",
    "ensure_schema",
    "previous_attempt",
    "log_running",
    "clear_day",
)
RUN_EVENTS = ("RUN_ENQUEUED", "RUN_DEQUEUED", "RUN_STARTING", "RUN_START", "STEP_START")
RUN_PID_RE = re.compile(r"Started process for run \(pid: (\d+)\)")
FINISHED_RUN_STATUSES = {"SUCCESS", "FAILURE", "CANCELED"}


# --------------------------------------------------------------------------- exports and tenant


def window(args: argparse.Namespace) -> tuple[dt.date, dt.date]:
    first = dt.date.fromisoformat(args.start_date)
    return first, first + dt.timedelta(days=args.days - 1)


def bench_tenant(exports: Path, args: argparse.Namespace):
    from atlas_dagster.tenants import Tenant

    first, last = window(args)
    return Tenant(ORG, BRAND, f"file://{exports}", first, last, tuple(args.domains))


def generate(tenant, args: argparse.Namespace) -> dict[str, Any]:
    """Every day of every domain, written once; reused while its marker file matches."""
    from testkit.bulk_exports import ensure_bulk_day

    started, written, size = time.monotonic(), 0, 0
    day = tenant.start_date
    while day <= tenant.end_date:
        for domain in tenant.domains:
            folder, reused = ensure_bulk_day(tenant, domain, day, args.rows, args.rows_per_file)
            written += 0 if reused else 1
            size += sum(p.stat().st_size for p in folder.glob("*.parquet"))
        day += dt.timedelta(days=1)
    total = args.days * len(tenant.domains)
    seconds = time.monotonic() - started
    print(
        f"exports: {total} tenant-days ({written} written, {total - written} reused), "
        f"{size / MB:,.0f} MB, {seconds:.0f}s",
        flush=True,
    )
    return {"tenant_days": total, "written": written, "bytes": size, "seconds": seconds}


# --------------------------------------------------------------------------- run worker RSS


class TreeRssByPid(threading.Thread):
    """Peak RSS of every process under `dagster dev`, by pid; runs are matched to their pid
    afterwards from the run's own "Started process for run (pid: N)" event."""

    def __init__(self, root_pid: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.root_pid, self.interval = root_pid, interval
        self.peak_by_pid: dict[int, int] = {}
        self.peak_tree = 0
        self._halt = threading.Event()

    def _descendants(self) -> list[int]:
        children, pids, todo = _children_map(), [], [self.root_pid]
        while todo:
            pid = todo.pop()
            pids.append(pid)
            todo.extend(children.get(pid, []))
        return pids

    def run(self) -> None:
        while not self._halt.is_set():
            sizes = {pid: _rss_bytes(pid) for pid in self._descendants()}
            self.peak_tree = max(self.peak_tree, sum(sizes.values()))
            for pid, size in sizes.items():
                self.peak_by_pid[pid] = max(self.peak_by_pid.get(pid, 0), size)
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


# --------------------------------------------------------------------------- launching


def wait_for_daemons(
    home: Path, timeout: float = 180.0, env: Mapping[str, str] | None = None
) -> float:
    """Seconds until the daemons that launch backfills and runs have sent a heartbeat (`env`:
    the stack's, for an instance stored in PostgreSQL)."""
    from testkit.postgres_server import instance_at

    started = time.monotonic()
    with instance_at(home, env or {}) as instance:
        while True:
            beating = set(instance.get_daemon_heartbeats())
            if all(name in beating for name in DAEMONS_NEEDED):
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"daemons {DAEMONS_NEEDED} not all up after {timeout}s")
            time.sleep(0.5)


def init_db(env: dict[str, str]) -> None:
    subprocess.run(
        [str(VENV_BIN / "atlas-dagster"), "init-db"],
        env=env,
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )


def stop_gold_automation(env: dict[str, str]) -> None:
    """As the UI's toggle would: the raw backfill alone, without gold replays sharing the engine."""
    subprocess.run(
        [str(VENV_BIN / "dagster"), "sensor", "stop", "gold_after_raw", "-w", "workspace.yaml"],
        env=env,
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )


def launch_backfill_cli(stack, tenant) -> tuple[str, float]:
    """`atlas-dagster backfill --wait` for the whole window; returns (backfill id, CLI seconds)."""
    command = [
        str(VENV_BIN / "atlas-dagster"),
        "backfill",
        "--org",
        tenant.organization_id,
        "--brand",
        tenant.brand_id,
        "--start",
        tenant.start_date.isoformat(),
        "--end",
        tenant.end_date.isoformat(),
        "--url",
        stack.url,
        "--wait",
    ]
    print("$ " + " ".join(command[1:]), flush=True)
    started = time.monotonic()
    done = subprocess.run(
        command,
        env=stack.env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=BACKFILL_TIMEOUT_SECONDS,
    )
    seconds = time.monotonic() - started
    print(done.stdout.strip(), flush=True)
    match = re.search(r"launched backfill (\S+):", done.stdout)
    if done.returncode != 0 or match is None:
        raise RuntimeError(
            f"backfill failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
            f"\n--- dagster dev ---\n{stack.log_tail()}"
        )
    return match.group(1), seconds


def single_day_keys(tenant, count: int) -> Iterator[tuple[str, str]]:
    """(asset, partition key) of `count` single-day runs: the newest days, domains in turn."""
    day, index = tenant.end_date, 0
    while index < count:
        domain = tenant.domains[index % len(tenant.domains)]
        yield f"tbt_raw_events_{domain}", f"{day.isoformat()}|{tenant.key}"
        index += 1
        if index % len(tenant.domains) == 0:
            day -= dt.timedelta(days=1)
            if day < tenant.start_date:
                day = tenant.end_date


def launch_single_runs(stack, tenant, count: int) -> list[str]:
    """Single-partition backfills through GraphQL, each once the previous one's run finished
    (not the backfill: the daemon marks a backfill completed on a later tick)."""
    from dagster import DagsterInstance

    from atlas_dagster.cli.dagster_api import DagsterApi

    api, ids = DagsterApi(stack.url), []
    with DagsterInstance.from_config(str(stack.home)) as instance:
        for asset, key in single_day_keys(tenant, count):
            backfill_id = api.launch_backfill({asset: [(key, key)]}, f"bench single {key}", {})
            status = _wait_for_run(instance, backfill_id)
            print(f"  single run {asset} {key}: {status}", flush=True)
            ids.append(backfill_id)
    return ids


def _wait_for_run(instance, backfill_id: str) -> str:
    from dagster._core.storage.dagster_run import RunsFilter

    from atlas_dagster.core.tags import BACKFILL_ID_TAG

    deadline = time.monotonic() + SINGLE_RUN_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        runs = instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
        if runs and all(r.status.value in FINISHED_RUN_STATUSES for r in runs):
            return ",".join(r.status.value for r in runs)
        time.sleep(0.25)
    raise RuntimeError(f"the run of single-day backfill {backfill_id} did not finish")


# --------------------------------------------------------------------------- reading back


def run_pid(instance, run_id: str) -> int | None:
    """The run worker's pid, from the engine event the run process writes when it starts."""
    from dagster import DagsterEventType

    records = instance.get_records_for_run(
        run_id, of_type=DagsterEventType.ENGINE_EVENT, limit=100
    ).records
    for record in records:
        match = RUN_PID_RE.search(record.event_log_entry.message or "")
        if match:
            return int(match.group(1))
    return None


def run_events(instance, run_id: str) -> dict[str, float]:
    """Unix time of the first event of each RUN_EVENTS type in the run."""
    from dagster import DagsterEventType

    from testkit.insert_timeline import first_event_times

    return first_event_times(instance, run_id, [DagsterEventType[name] for name in RUN_EVENTS])


def day_records(instance, run_id: str) -> list[dict[str, Any]]:
    """Every raw materialization of the run with the metadata the benchmark needs."""
    from testkit.insert_timeline import insert_intervals

    return [
        {
            "asset": interval.asset_key,
            "partition": interval.partition_key,
            "run_id": interval.run_id,
            "rows_loaded": interval.rows_loaded,
            "insert_started_at": interval.started_at,
            "insert_finished_at": interval.finished_at,
            "insert_seconds": interval.insert_seconds,
            "phases": interval.phases,
        }
        for interval in insert_intervals(instance, [run_id])
    ]


def _statement_start(day: dict[str, Any]) -> float:
    wall = day["phases"].get("wall_seconds", {})
    return day["insert_started_at"] + sum(wall.get(name, 0.0) for name in PHASES_BEFORE_INSERT)


def run_launch(instance, run_id: str, days: list[dict[str, Any]], rss: dict[int, int]) -> dict:
    """One run's path from the queue to its first INSERT."""
    events = run_events(instance, run_id)
    first = min(days, key=lambda d: d["insert_started_at"]) if days else None
    slot_held = first and first["insert_started_at"]
    starting = events.get("RUN_STARTING")
    pid = run_pid(instance, run_id)

    def span(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else b - a

    return {
        "run_id": run_id,
        "events": events,
        "days": len(days),
        "first_day": first and f"{first['asset']} {first['partition']}",
        "queued_s": span(events.get("RUN_ENQUEUED"), starting),
        "starting_to_run_start_s": span(starting, events.get("RUN_START")),
        "run_start_to_step_start_s": span(events.get("RUN_START"), events.get("STEP_START")),
        "step_start_to_slot_s": span(events.get("STEP_START"), slot_held),
        "launch_to_insert_start_s": span(starting, slot_held),
        "launch_to_insert_statement_s": span(starting, first and _statement_start(first)),
        "pid": pid,
        "peak_rss_bytes": rss.get(pid) if pid else None,
    }


def backfill_runs(instance, backfill_id: str) -> list[str]:
    from dagster._core.storage.dagster_run import RunsFilter

    from atlas_dagster.core.tags import BACKFILL_ID_TAG

    records = instance.get_run_records(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
    return [r.dagster_run.run_id for r in sorted(records, key=lambda r: r.create_timestamp)]


def phase_totals(days: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for day in days:
        for name, seconds in day["phases"].get("wall_seconds", {}).items():
            wall[name] = wall.get(name, 0.0) + seconds
        for name, seconds in day["phases"].get("process_cpu_seconds", {}).items():
            cpu[name] = cpu.get(name, 0.0) + seconds
    return {
        name: {"wall": wall[name], "cpu": cpu.get(name, 0.0)} for name in phases_in_order(set(wall))
    }


def backfill_summary(instance, backfill_id: str, rss: TreeRssByPid) -> dict[str, Any]:
    backfill = instance.get_backfill(backfill_id)
    run_ids = backfill_runs(instance, backfill_id)
    days = [d for run_id in run_ids for d in day_records(instance, run_id)]
    if not days:
        raise RuntimeError(f"backfill {backfill_id} materialized nothing")
    runs = [
        run_launch(instance, r, [d for d in days if d["run_id"] == r], rss.peak_by_pid)
        for r in run_ids
    ]
    created = backfill.backfill_timestamp
    completed = backfill.backfill_end_timestamp
    last_insert = max(d["insert_finished_at"] for d in days)
    insert_sum = sum(d["insert_seconds"] for d in days)
    slot_sum = sum(d["insert_finished_at"] - d["insert_started_at"] for d in days)
    rows = sum(d["rows_loaded"] for d in days)
    wall = last_insert - created
    launched = min(
        (r["events"]["RUN_STARTING"] for r in runs if "RUN_STARTING" in r["events"]),
        default=created,
    )
    return {
        "backfill_id": backfill_id,
        "status": backfill.status.value,
        "runs": runs,
        "timeline": backfill_timeline(created, runs, days, completed),
        "tenant_days": len(days),
        "rows_loaded": rows,
        "created_at": created,
        "first_insert_started_at": min(d["insert_started_at"] for d in days),
        "last_insert_finished_at": last_insert,
        "completed_at": completed,
        "wall_to_last_insert_s": wall,
        "wall_to_completed_s": None if completed is None else completed - created,
        "sum_insert_seconds": insert_sum,
        "sum_slot_seconds": slot_sum,
        "ratio_wall_to_inserts": wall / insert_sum,
        "ratio_wall_to_slots": wall / slot_sum,
        # Without the backfill daemon's pick-up (its loop sleeps 30 s) and the queue.
        "ratio_launched_to_inserts": (last_insert - launched) / insert_sum,
        "rows_per_s": rows / wall,
        "phase_totals": phase_totals(days),
        "days": days,
    }


def backfill_timeline(
    created: float, runs: list[dict], days: list[dict], completed: float | None
) -> dict[str, float]:
    """Seconds between the backfill's landmarks, from its creation to its completed mark."""
    first_event = {
        name: min((r["events"][name] for r in runs if name in r["events"]), default=None)
        for name in ("RUN_ENQUEUED", "RUN_STARTING")
    }
    marks = [
        ("backfill created", created),
        ("first run enqueued", first_event["RUN_ENQUEUED"]),
        ("first run launched", first_event["RUN_STARTING"]),
        ("first slot held", min(d["insert_started_at"] for d in days)),
        ("last INSERT finished", max(d["insert_finished_at"] for d in days)),
        ("backfill completed", completed),
    ]
    present = [(name, at) for name, at in marks if at is not None]
    return {f"{a} -> {b}": tb - ta for (a, ta), (b, tb) in zip(present, present[1:], strict=False)}


def single_runs_summary(instance, backfill_ids: list[str], rss: TreeRssByPid) -> dict[str, Any]:
    runs = []
    for backfill_id in backfill_ids:
        backfill = instance.get_backfill(backfill_id)
        for run_id in backfill_runs(instance, backfill_id):
            launch = run_launch(instance, run_id, day_records(instance, run_id), rss.peak_by_pid)
            starting = launch["events"].get("RUN_STARTING")
            launch["backfill_created_to_launch_s"] = (
                None if starting is None else starting - backfill.backfill_timestamp
            )
            runs.append(launch)
    return {
        "runs": runs,
        "median_launch_to_insert_start_s": _median(runs, "launch_to_insert_start_s"),
        "median_launch_to_insert_statement_s": _median(runs, "launch_to_insert_statement_s"),
        "median_backfill_created_to_launch_s": _median(runs, "backfill_created_to_launch_s"),
    }


def _median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r[key] is not None]
    return statistics.median(values) if values else None


def _s(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _mb(value: int | None) -> str:
    return "-" if not value else f"{value / MB:,.0f}"


def print_runs(title: str, runs: list[dict]) -> None:
    print(f"\n{title}")
    header = (
        f"{'run':<8} {'days':>4} {'queued':>7} | {'STARTING->RUN_START':>19} "
        f"{'->STEP_START':>12} {'->slot held':>11} | {'launch->INSERT start':>20} "
        f"{'(->statement)':>13} | {'peak RSS MB':>11}"
    )
    print(header + "\n" + "-" * len(header))
    for r in runs:
        print(
            f"{r['run_id'][:8]:<8} {r['days']:>4} {_s(r['queued_s']):>7} | "
            f"{_s(r['starting_to_run_start_s']):>19} {_s(r['run_start_to_step_start_s']):>12} "
            f"{_s(r['step_start_to_slot_s']):>11} | {_s(r['launch_to_insert_start_s']):>20} "
            f"{_s(r['launch_to_insert_statement_s']):>13} | {_mb(r['peak_rss_bytes']):>11}"
        )


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def print_backfill(summary: dict, expected_rows: int) -> None:
    print_runs("backfill runs (launch = the run's RUN_STARTING event)", summary["runs"])
    median = _median(summary["runs"], "launch_to_insert_start_s")
    wall, ratio = summary["wall_to_last_insert_s"], summary["ratio_wall_to_inserts"]
    completed = _s(summary["wall_to_completed_s"], 1)
    print(
        f"\nmedian launch -> first INSERT start over the backfill's {len(summary['runs'])} "
        f"run(s): {_s(median)} s"
        f"\nbackfill {summary['backfill_id']} {summary['status']}: {summary['tenant_days']} "
        f"tenant-days, {summary['rows_loaded']:,} rows (expected {expected_rows:,})"
        f"\n  wall, created -> last INSERT finished:   {wall:10.1f} s"
        f"\n  wall, created -> marked completed:       {completed:>10} s"
        f"\n  sum of insert_seconds (INSERT alone):    {summary['sum_insert_seconds']:10.1f} s"
        f"\n  sum of slot spans (per-day slot held):   {summary['sum_slot_seconds']:10.1f} s"
        f"\n  ratio wall / sum of INSERTs:             {ratio:10.2f}   "
        f"(target <= {WALL_RATIO_TARGET}: {_verdict(ratio <= WALL_RATIO_TARGET)})"
        f"\n  ratio wall / sum of slot spans:          {summary['ratio_wall_to_slots']:10.2f}"
        f"\n  ratio (first run launched -> last INSERT) / sum of INSERTs: "
        f"{summary['ratio_launched_to_inserts']:.2f}"
        f"\n  rows/s (rows / wall to last INSERT):     {summary['rows_per_s']:10,.0f}"
    )
    print("\nthe backfill's timeline (wall s)")
    for span, seconds in summary["timeline"].items():
        print(f"  {span:<45} {seconds:8.1f}")
    print("\nwhere the days' time went (sum over every tenant-day; load_phases metadata)")
    print(f"{'phase':<20} {'wall s':>10} {'CPU s':>10}")
    for name, totals in summary["phase_totals"].items():
        print(f"{name:<20} {totals['wall']:>10.2f} {totals['cpu']:>10.2f}")
    print(
        "(CPU is the run process's during each phase: with days in flight together it also "
        "holds their work, so it adds up to more than the process used)"
    )


def print_single_runs(summary: dict) -> None:
    print_runs(
        "single-day runs, launched one after another (launch = RUN_STARTING)", summary["runs"]
    )
    median = summary["median_launch_to_insert_start_s"]
    ok = median is not None and median <= LAUNCH_TARGET_SECONDS
    print(
        f"\nmedian launch -> INSERT start (slot held): {_s(median)} s "
        f"(target <= {LAUNCH_TARGET_SECONDS} s: {_verdict(ok)}); to the INSERT statement: "
        f"{_s(summary['median_launch_to_insert_statement_s'])} s"
        f"\nmedian backfill created -> run launched (backfill daemon pick-up + queue): "
        f"{_s(summary['median_backfill_created_to_launch_s'])} s"
    )


def append_result(path: Path, document: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    history = json.loads(path.read_text()) if path.exists() else []
    history.append(document)
    path.write_text(json.dumps(history, indent=2, default=str))


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_backfill",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--days", type=int, default=30, help="days in the window (default 30)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per day and domain")
    parser.add_argument(
        "--domains",
        type=lambda raw: [d for d in raw.split(",") if d],
        default=list(ALL_DOMAINS),
        help="comma-separated (default: all four)",
    )
    parser.add_argument("--rows-per-file", type=int, default=250_000)
    parser.add_argument("--start-date", default="2026-10-01")
    parser.add_argument("--single-runs", type=int, default=8, help="single-day runs (0: none)")
    parser.add_argument("--skip-backfill", action="store_true", help="single-day runs only")
    parser.add_argument(
        "--without-gold",
        action="store_true",
        help="stop the gold automation sensor first: in embedded mode gold replays share the "
        "one engine with the raw INSERTs",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=REPO_ROOT / ".bench-work" / "backfill",
        help="exports live here and are reused (default .bench-work/backfill)",
    )
    parser.add_argument(
        "--keep-stack",
        action="store_true",
        help="keep the run's Dagster home and ClickHouse data (as large as the exports or more)",
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench-results" / "backfill.json")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.domains) - set(ALL_DOMAINS))
    if unknown or not args.domains:
        parser.error(f"--domains: unknown {unknown}; choose from {list(ALL_DOMAINS)}")
    return args


def measure(stack, tenant, args: argparse.Namespace, rss: TreeRssByPid) -> dict[str, Any]:
    from dagster import DagsterInstance

    result: dict[str, Any] = {"daemons_up_s": wait_for_daemons(stack.home)}
    backfill_id = None
    if not args.skip_backfill:
        backfill_id, result["cli_seconds"] = launch_backfill_cli(stack, tenant)
    single_ids = launch_single_runs(stack, tenant, args.single_runs) if args.single_runs else []
    with DagsterInstance.from_config(str(stack.home)) as instance:
        if backfill_id:
            result["backfill"] = backfill_summary(instance, backfill_id, rss)
        if single_ids:
            result["single_runs"] = single_runs_summary(instance, single_ids, rss)
    result["peak_tree_rss_bytes"] = rss.peak_tree
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from testkit.dagster_stack import run_dagster_dev, write_tenants

    started = time.monotonic()
    work = args.workdir.resolve()
    tenant = bench_tenant(work / "exports", args)
    exports = generate(tenant, args)
    tenants_file = write_tenants(work / "tenants.yaml", [tenant])
    stack_dir = work / f"stack-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"
    try:
        with run_dagster_dev(stack_dir, tenants_file) as stack:
            init_db(stack.env)
            if args.without_gold:
                stop_gold_automation(stack.env)
            rss = TreeRssByPid(stack.pid)
            rss.start()
            try:
                result = measure(stack, tenant, args, rss)
            finally:
                rss.stop()
    finally:
        if not args.keep_stack:
            shutil.rmtree(stack_dir, ignore_errors=True)
    print("\n" + REFERENCE_ISSUE)
    if "backfill" in result:
        print_backfill(result["backfill"], args.days * len(args.domains) * args.rows)
    if "single_runs" in result:
        print_single_runs(result["single_runs"])
    print(f"\npeak RSS of the whole dagster dev tree: {_mb(result['peak_tree_rss_bytes'])} MB")
    import chdb

    document = {
        "generated_at": dt.datetime.now(dt.UTC).isoformat(),
        "machine": {"cpus": os.cpu_count(), "chdb": chdb.__version__},
        "scale": {
            "days": args.days,
            "rows_per_day_and_domain": args.rows,
            "domains": args.domains,
            "rows_per_file": args.rows_per_file,
            "single_runs": args.single_runs,
            "gold_automation": not args.without_gold,
        },
        "launch_basis": "RUN_STARTING event -> first day's insert_started_at (pool slot held); "
        "'statement' adds that day's session phases before its INSERT (load_phases)",
        "wall_basis": "backfill_timestamp (created) -> last insert_finished_at / "
        "backfill_end_timestamp",
        "rss_basis": "peak RSS of each run's worker process (the pid of its 'Started process "
        "for run' event), /proc polled every 0.2 s",
        "reference_issue": REFERENCE_ISSUE,
        "exports": exports,
        **result,
        "total_seconds": time.monotonic() - started,
    }
    append_result(args.out, document)
    print(f"appended to {args.out} (total {document['total_seconds']:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
