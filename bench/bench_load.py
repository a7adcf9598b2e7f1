"""Load benchmark: the Dagster pipeline (Null inbound + bridge MV) against a bare chDB INSERT.

Run with `.venv/bin/python -m bench.bench_load` (the `make bench` target). On the same data:

* generates N days of >= 1M casino rows plus one 5M-row day (testkit.bulk_exports) as
  several Parquet files per day in the export layout, and a tenants YAML for bench.main;
* (a) pipeline: one `dagster asset materialize ... --partition "DAY|bench.main"` process per
  day, under /usr/bin/time -v, with its process tree's RSS polled from /proc; the day's fresh
  chDB directory gets the schema first (`atlas-dagster init-db`, as a deployment does once and
  as the bare run does before its timer; --fresh-schema leaves it to the step);
* (b) bare engine: one python process per day that opens chDB on a fresh directory, applies
  the schema and runs INSERT INTO atlas.tbt_raw_events_casino SELECT ... FROM file(...) with
  the engine's defaults (the targets' reference), then once more with the pipeline's INSERT
  settings ("bare*"), so that what the settings buy is told apart from what the pipeline costs.

Each side runs --repeat times per day (default 3), alternating which goes first, after a sync
and --settle seconds of quiet, and the median run of each side is compared (every run is
printed too): see bench/protocol.py.

Throughput of the pipeline is given two ways: over the load step (backfill_log started_at ->
updated_at of the 'completed' row: engine lock and open, schema check, attempt, 'running' log,
clear, INSERT, count FINAL; validation runs before it) and over the INSERT statement alone (timed
in the step process by a sitecustomize hook that the benchmark writes into its own temporary
directory). The bare figure is the INSERT alone. CPU seconds (user + system of the process,
engine threads included) are reported too, as they are steadier than wall time on a shared
machine: around the bare INSERT, and per phase of the pipeline's day from the materialization's
load_phases metadata, with the process's timeline from its Dagster events. Results: tables on
stdout and JSON in bench-results/bench.json. Each day's chDB directories are removed once it is
measured (--keep-engines keeps them).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench.protocol import (
    DEFAULT_REPEAT,
    DEFAULT_SETTLE_SECONDS,
    json_worker,
    median_run,
    phases_in_order,
    settle,
    sides_in_order,
)

if TYPE_CHECKING:
    from atlas_dagster.tenants import Tenant

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
DOMAIN = "casino"
ASSET = "tbt_raw_events_casino"
ORG, BRAND = "bench", "main"
TENANT_KEY = f"{ORG}.{BRAND}"
MB = 1024 * 1024
RSS_SLACK_MB = 300
# The bare INSERT of the targets: the engine's defaults (hive partitioning off, as in the pipeline,
# so that both read the same columns). A second bare run per repeat uses the pipeline's own
# INSERT settings, so that what the settings buy is told apart from what the pipeline costs.
BARE_ENGINE_SETTINGS = "use_hive_partitioning = 0"
RATIO_TARGET = 0.95  # the load step's throughput over the bare INSERT's (issue 10)
CPU_TARGET = 1.1  # the pipeline day's CPU at most this times the bare INSERT's

BARE_COLUMNS = (
    "organization_id, brand_id, event_date, event_id, event_type, event_timestamp, user_id, "
    "bet_id, game_id, amount, currency, source_file, ingestion_path, ingested_at"
)
BARE_SELECT = (
    "organization_id, brand_id, toDate(event_timestamp) AS event_date, event_id, event_type, "
    "event_timestamp, user_id, bet_id, game_id, amount, currency, _path AS source_file, "
    "'backfill' AS ingestion_path, now64(6) AS ingested_at"
)

# Written into the benchmark's temp dir and put first on PYTHONPATH of the pipeline processes:
# times the inbound INSERT statement as the step process runs it. Nothing in the project changes.
INSERT_HOOK = """
import json, os, time
_path = os.environ.get("BENCH_INSERT_TIMINGS")
if _path:
    import clickhouse_connect as _cc

    _get_client = _cc.get_client

    def _timed_get_client(*args, **kwargs):
        client = _get_client(*args, **kwargs)
        command = client.command

        def timed_command(cmd, *a, **kw):
            if not (isinstance(cmd, str) and "INSERT INTO atlas." in cmd
                    and "_events_inbound" in cmd):
                return command(cmd, *a, **kw)
            started = time.monotonic()
            result = command(cmd, *a, **kw)
            with open(_path, "a") as handle:
                handle.write(json.dumps({"pid": os.getpid(),
                                         "seconds": time.monotonic() - started}) + "\\n")
            return result

        client.command = timed_command
        return client

    _cc.get_client = _timed_get_client
"""


# --------------------------------------------------------------------------- data generation


def _day_plan(args: argparse.Namespace) -> list[tuple[dt.date, int]]:
    start = dt.date.fromisoformat(args.start_date)
    plan = [(start + dt.timedelta(days=i), args.rows) for i in range(args.days)]
    if args.big_rows:
        plan.append((start + dt.timedelta(days=args.days), args.big_rows))
    return plan


def bench_tenant(exports: Path, plan: list[tuple[dt.date, int]]) -> Tenant:
    from atlas_dagster.tenants import Tenant

    return Tenant(
        ORG,
        BRAND,
        f"file://{exports}",
        min(d for d, _ in plan),
        max(d for d, _ in plan),
        (DOMAIN,),
    )


def generate(exports: Path, plan: list[tuple[dt.date, int]], rows_per_file: int) -> list[dict]:
    """The days' casino exports (testkit.bulk_exports), reused when written."""
    # Imported here: the bare worker process must not load the project (dagster) into its RSS.
    from testkit.bulk_exports import ensure_bulk_day

    tenant = bench_tenant(exports, plan)
    days = []
    for day, rows in plan:
        started = time.monotonic()
        folder, reused = ensure_bulk_day(tenant, DOMAIN, day, rows, rows_per_file)
        files = len(list(folder.glob("*.parquet")))
        verb = "reusing" if reused else "wrote"
        took = "" if reused else f" ({time.monotonic() - started:.1f}s)"
        print(f"  {day}: {verb} {rows:,} rows in {files} files{took}", flush=True)
        size = sum(p.stat().st_size for p in folder.glob("*.parquet"))
        days.append(
            {
                "day": day.isoformat(),
                "rows": rows,
                "files": files,
                "bytes": size,
                "folder": str(folder),
            }
        )
    return days


def write_tenants(path: Path, exports: Path, plan: list[tuple[dt.date, int]]) -> None:
    import yaml

    tenant = {
        "organization_id": ORG,
        "brand_id": BRAND,
        "source": f"file://{exports}",
        "start_date": min(d for d, _ in plan).isoformat(),
        "end_date": max(d for d, _ in plan).isoformat(),
        "domains": [DOMAIN],
    }
    path.write_text(yaml.safe_dump({"tenants": [tenant]}))


# --------------------------------------------------------------------------- process measurement


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


class TreeRss(threading.Thread):
    """Polls /proc: peak of the summed RSS of a process tree, and of its largest process."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_tree = self.peak_single = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            children = _children_map()
            pids, todo = [], [self.pid]
            while todo:
                pid = todo.pop()
                pids.append(pid)
                todo.extend(children.get(pid, []))
            sizes = [_rss_bytes(p) for p in pids]
            self.peak_tree = max(self.peak_tree, sum(sizes))
            self.peak_single = max(self.peak_single, max(sizes, default=0))
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def _time_v_max_rss(path: Path) -> int | None:
    for line in path.read_text().splitlines():
        if "Maximum resident set size" in line:
            return int(line.rsplit(":", 1)[1]) * 1024
    return None


def run_measured(cmd: list[str], env: dict, cwd: Path, log: Path, timeout: float) -> dict:
    time_file = log.with_suffix(".time")
    started, started_unix = time.monotonic(), time.time()
    with open(log, "w") as out:
        process = subprocess.Popen(
            ["/usr/bin/time", "-v", "-o", str(time_file), *cmd],
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        poller = TreeRss(process.pid)
        poller.start()
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        finally:
            poller.stop()
    return {
        "returncode": code,
        "wall_seconds": time.monotonic() - started,
        "started_at_unix": started_unix,
        "max_rss_time_v": _time_v_max_rss(time_file),
        "peak_tree_rss_polled": poller.peak_tree,
        "peak_process_rss_polled": poller.peak_single,
        "log": str(log),
    }


def _worker(args: list[str], env: dict | None = None, cwd: Path = REPO_ROOT) -> dict:
    return json_worker("bench.bench_load", args, cwd, env, timeout=900)


# --------------------------------------------------------------------------- the two measurements


def run_pipeline(day: dict, work: Path, args: argparse.Namespace, base_env: dict) -> dict:
    ch_dir = work / "pipeline" / day["day"] / "clickhouse"
    if ch_dir.parent.exists():
        shutil.rmtree(ch_dir.parent)
    ch_dir.parent.mkdir(parents=True)
    timings = ch_dir.parent / "insert_timings.jsonl"
    env = base_env | {
        "ATLAS_CLICKHOUSE_DSN": f"chdb://{ch_dir}",
        "BENCH_INSERT_TIMINGS": str(timings),
    }
    if not args.fresh_schema:
        # As the bare run does before its timer, and as a deployment does once (init-db): on a
        # fresh engine directory ensure_schema would otherwise apply every DDL inside the step.
        subprocess.run(
            [str(VENV_BIN / "atlas-dagster"), "init-db"],
            env=env,
            cwd=args.project_root,
            check=True,
            capture_output=True,
            timeout=300,
        )
    partition = f"{day['day']}|{TENANT_KEY}"
    cmd = [
        str(VENV_BIN / "dagster"),
        "asset",
        "materialize",
        "-m",
        "atlas_dagster.definitions",
        "--select",
        ASSET,
        "--partition",
        partition,
    ]
    measured = run_measured(cmd, env, args.project_root, ch_dir.parent / "dagster.log", 900)
    if measured["returncode"] != 0:
        tail = Path(measured["log"]).read_text()[-3000:]
        raise RuntimeError(f"dagster materialize {partition} failed:\n{tail}")
    inspected = _worker(
        ["_inspect", env["ATLAS_CLICKHOUSE_DSN"], day["day"]], env=env, cwd=args.project_root
    )
    if not args.keep_engines:
        shutil.rmtree(ch_dir, ignore_errors=True)
    inserts = (
        [json.loads(line) for line in timings.read_text().splitlines()]
        if (timings.exists())
        else []
    )
    rows = inspected["rows_loaded"]
    load_s = inspected["load_step_seconds"]
    insert_s = inserts[-1]["seconds"] if inserts else None
    insert_cpu = (inspected.get("phases") or {}).get("process_cpu_seconds", {}).get("insert")
    return (
        measured
        | inspected
        | {
            "insert_seconds": insert_s,
            "insert_cpu_seconds": insert_cpu,
            "rows_per_s_load_step": rows / load_s,
            "rows_per_s_insert": rows / insert_s if insert_s else None,
            "timeline": run_timeline(measured, inspected),
        }
    )


def run_timeline(measured: dict, inspected: dict) -> dict[str, float]:
    """Seconds between the pipeline process's landmarks, from its launch to its exit."""
    events = inspected.get("run_events") or {}
    marks = [("process launched", measured["started_at_unix"])]
    marks += [
        (name, events[key])
        for name, key in (
            ("RUN_START", "RUN_START"),
            ("STEP_START", "STEP_START"),
            ("materialization", "ASSET_MATERIALIZATION"),
            ("STEP_SUCCESS", "STEP_SUCCESS"),
            ("RUN_SUCCESS", "RUN_SUCCESS"),
        )
        if key in events
    ]
    marks.append(("process exited", measured["started_at_unix"] + measured["wall_seconds"]))
    return {f"{a} -> {b}": tb - ta for (a, ta), (b, tb) in zip(marks, marks[1:], strict=False)}


def run_bare(
    day: dict, work: Path, keep_engines: bool, settings_sql: str = BARE_ENGINE_SETTINGS
) -> dict:
    """One bare INSERT in its own process, with the engine's defaults or the given settings."""
    ch_dir = work / "bare" / day["day"] / "clickhouse"
    if ch_dir.parent.exists():
        shutil.rmtree(ch_dir.parent)
    ch_dir.parent.mkdir(parents=True)
    cmd = [
        sys.executable,
        "-m",
        "bench.bench_load",
        "_bare",
        f"chdb://{ch_dir}",
        f"{day['folder']}/*.parquet",
        settings_sql,
    ]
    measured = run_measured(cmd, dict(os.environ), REPO_ROOT, ch_dir.parent / "bare.log", 900)
    if measured["returncode"] != 0:
        raise RuntimeError(f"bare load failed:\n{Path(measured['log']).read_text()[-3000:]}")
    result = json.loads(Path(measured["log"]).read_text().strip().splitlines()[-1])
    if not keep_engines:
        shutil.rmtree(ch_dir, ignore_errors=True)
    return measured | result | {"rows_per_s_insert": result["rows"] / result["insert_seconds"]}


# --------------------------------------------------------------------------- workers


def _process_cpu() -> float:
    """User + system CPU of this process, the embedded engine's threads included."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def pipeline_settings_sql() -> str:
    """The pipeline INSERT's settings, for the reference bare run that uses them too."""
    from atlas_dagster.loading.statements import INSERT_SETTINGS

    return ", ".join(f"{k} = {int(v)}" for k, v in INSERT_SETTINGS.items())


def worker_bare(dsn: str, glob: str, settings_sql: str = BARE_ENGINE_SETTINGS) -> None:
    """One bare INSERT SELECT from file() into the raw table, on a fresh chDB directory."""
    import clickhouse_connect

    from atlas_dagster.resources.schema import apply_schema

    client = clickhouse_connect.get_client(dsn=dsn)
    apply_schema(client)
    rss_before = _rss_bytes(os.getpid())
    statement = (
        f"INSERT INTO atlas.{ASSET} ({BARE_COLUMNS}) SELECT {BARE_SELECT} "
        f"FROM file('{glob}', 'Parquet') SETTINGS {settings_sql}"
    )
    started, cpu_started = time.monotonic(), _process_cpu()
    client.command(statement)
    insert_seconds = time.monotonic() - started
    insert_cpu = _process_cpu() - cpu_started
    rows = int(client.command(f"SELECT count() FROM atlas.{ASSET}"))
    client.close()
    print(
        json.dumps(
            {
                "rows": rows,
                "insert_seconds": insert_seconds,
                "insert_cpu_seconds": insert_cpu,
                "rss_before_insert": rss_before,
                "statement": statement,
            }
        )
    )


def worker_inspect(dsn: str, day: str) -> None:
    """Reads back what the pipeline process left: backfill_log, raw rows, Dagster metadata."""
    import clickhouse_connect
    from dagster import AssetKey, DagsterInstance

    client = clickhouse_connect.get_client(dsn=dsn)
    log = client.query(
        "SELECT status, rows_loaded, source_rows, files, started_at, updated_at, query_id "
        "FROM atlas.backfill_log FINAL WHERE domain = {d:String} AND partition_date = {p:Date}",
        parameters={"d": DOMAIN, "p": dt.date.fromisoformat(day)},
    )
    [row] = [dict(zip(log.column_names, r, strict=True)) for r in log.result_rows]
    if row["status"] != "completed":
        raise RuntimeError(f"backfill_log says {row['status']} for {day}")
    raw = int(client.command(f"SELECT count() FROM atlas.{ASSET} FINAL"))
    client.close()
    with DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(AssetKey(ASSET))
        metadata = event.asset_materialization.metadata if event else {}
        partition = event.asset_materialization.partition if event else None
        run_events = _run_events(instance, event.run_id) if event else {}
    from atlas_dagster.loading import statements

    print(
        json.dumps(
            {
                "insert_settings": statements.INSERT_SETTINGS,
                "atlas_dagster_from": statements.__file__,
                "rows_loaded": int(row["rows_loaded"]),
                "source_rows": int(row["source_rows"]),
                "raw_rows_final": raw,
                "load_step_seconds": (row["updated_at"] - row["started_at"]).total_seconds(),
                "materialization_duration_seconds": metadata["duration_seconds"].value
                if "duration_seconds" in metadata
                else None,
                "materialization_partition": str(partition),
                # Absent when --project-root is a copy of the project without load_phases.
                "phases": metadata["load_phases"].value if "load_phases" in metadata else None,
                "run_events": run_events,
            }
        )
    )


def _run_events(instance, run_id: str) -> dict[str, float]:
    """Unix time of the first event of each type that marks the run's timeline."""
    from dagster import DagsterEventType

    from testkit.insert_timeline import first_event_times

    kinds = [
        DagsterEventType.RUN_START,
        DagsterEventType.STEP_START,
        DagsterEventType.ASSET_MATERIALIZATION,
        DagsterEventType.STEP_SUCCESS,
        DagsterEventType.RUN_SUCCESS,
    ]
    return first_event_times(instance, run_id, kinds)


# --------------------------------------------------------------------------- report


def _mb(value: int | None) -> str:
    return "-" if value is None else f"{value / MB:,.0f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def measure_day(
    day: dict, work: Path, args: argparse.Namespace, base_env: dict
) -> tuple[list[dict], list[dict], list[dict]]:
    """The day's pipeline, bare and bare-with-the-pipeline's-settings runs, --repeat of each,
    alternating whether the pipeline or the bare runs go first."""
    sides = {"both": {"pipeline", "bare"}, "pipeline": {"pipeline"}, "bare": {"bare"}}[args.only]
    if args.bare_from:
        sides = sides - {"bare"}
    pipelines: list[dict] = []
    bares: list[dict] = []
    bares_same: list[dict] = []
    same_settings = pipeline_settings_sql()
    for repeat in range(args.repeat):
        for side in sides_in_order(repeat, "pipeline", "bare"):
            if side not in sides:
                continue
            if side == "bare":
                settle(args.settle)
                print(f"bare     {day['day']} ({day['rows']:,} rows) ...", flush=True)
                bares.append(run_bare(day, work, args.keep_engines))
                settle(args.settle)
                print(f"bare*    {day['day']} (pipeline's INSERT settings) ...", flush=True)
                bares_same.append(run_bare(day, work, args.keep_engines, same_settings))
                continue
            settle(args.settle)
            print(f"pipeline {day['day']} ({day['rows']:,} rows) ...", flush=True)
            sample = run_pipeline(day, work, args, base_env)
            if sample["rows_loaded"] != day["rows"]:
                raise RuntimeError(f"pipeline loaded {sample['rows_loaded']} rows")
            pipelines.append(sample)
    return pipelines, bares, bares_same


def _repeat_figures(sample: dict) -> dict:
    keys = ("load_step_seconds", "insert_seconds", "insert_cpu_seconds", "max_rss_time_v")
    return {key: sample.get(key) for key in keys}


def summarize_repeats(results: list[dict]) -> None:
    if not any(len(r.get("pipeline_repeats", [])) > 1 for r in results):
        return
    print(
        "\nevery repeat (s): pipeline load step / INSERT / INSERT cpu; bare INSERT / cpu; "
        "bare* (the pipeline's INSERT settings) INSERT / cpu"
    )
    for r in results:
        pipes = r.get("pipeline_repeats", [])
        bares = r.get("bare_repeats", [])
        pipe_text = "  ".join(
            f"{_secs(p['load_step_seconds'])}/{_secs(p['insert_seconds'])}/"
            f"{_secs(p['insert_cpu_seconds'])}"
            for p in pipes
        )
        bare_text, same_text = (
            "  ".join(
                f"{_secs(b['insert_seconds'])}/{_secs(b['insert_cpu_seconds'])}" for b in runs
            )
            for runs in (bares, r.get("bare_same_repeats", []))
        )
        print(f"{r['day']:<10} pipeline {pipe_text} | bare {bare_text} | bare* {same_text}")


def summarize(results: list[dict]) -> None:
    header = (
        f"{'day':<10} {'rows':>10} {'files':>5} | {'pipe r/s load':>13} {'pipe r/s ins':>12} "
        f"{'bare r/s':>11} {'bare* r/s':>11} | {'ratio load':>10} {'ratio ins':>9} "
        f"{'ratio ins*':>10} | {'RSS pipe MB':>11} "
        f"{'(tree)':>7} {'RSS bare MB':>11} | checks"
    )
    print("\n" + header + "\n" + "-" * len(header))
    for r in results:
        p, b, same = r.get("pipeline"), r.get("bare"), r.get("bare_same_settings")
        checks = r.get("checks", {})
        flags = " ".join(f"{k}={'ok' if v else 'FAIL'}" for k, v in checks.items())
        print(
            f"{r['day']:<10} {r['rows']:>10,} {r['files']:>5} | "
            f"{_rate(p and p['rows_per_s_load_step']):>13} "
            f"{_rate(p and p['rows_per_s_insert']):>12} "
            f"{_rate(b and b['rows_per_s_insert']):>11} "
            f"{_rate(same and same['rows_per_s_insert']):>11} | "
            f"{r.get('ratio_load_step', 0) or 0:>10.2f} {r.get('ratio_insert', 0) or 0:>9.2f} "
            f"{r.get('ratio_insert_same_settings', 0) or 0:>10.2f} | "
            f"{_mb(p and p['max_rss_time_v']):>11} {_mb(p and p['peak_tree_rss_polled']):>7} "
            f"{_mb(b and b['max_rss_time_v']):>11} | {flags}"
        )
    print(
        "\npipe r/s load = rows_loaded / (backfill_log updated_at - started_at) of the load step;"
        "\npipe r/s ins  = rows_loaded / time of the inbound INSERT statement alone;"
        "\nbare r/s      = rows / time of the bare INSERT SELECT alone (engine defaults): the"
        "\n                targets' reference;"
        "\nbare* r/s     = the same bare INSERT with the pipeline's INSERT settings; ratio ins* ="
        "\n                pipe r/s ins / bare* r/s: what the pipeline costs beyond its settings;"
        "\nRSS pipe      = /usr/bin/time -v max RSS (largest process: the step subprocess);"
        "\n(tree)        = peak of the summed RSS of the dagster process tree (/proc polling)."
    )
    summarize_repeats(results)
    summarize_cpu(results)
    summarize_phases(results)
    summarize_timelines(results)


def _phase_cpu_total(pipeline: dict) -> float | None:
    phases = (pipeline.get("phases") or {}).get("process_cpu_seconds")
    return sum(phases.values()) if phases else None


def summarize_cpu(results: list[dict]) -> None:
    """CPU seconds are steadier than wall seconds on a machine shared with other work."""
    print(
        f"\n{'day':<10} {'rows':>10} | {'bare INSERT cpu s':>17} {'bare* cpu s':>11} "
        f"{'pipe INSERT cpu s':>17} {'pipe day cpu s':>14} | {'ratio cpu ins':>13} "
        f"{'ratio cpu ins*':>14} {'ratio cpu day':>13}"
    )
    for r in results:
        p, b = r.get("pipeline") or {}, r.get("bare") or {}
        same_cpu = (r.get("bare_same_settings") or {}).get("insert_cpu_seconds")
        bare_cpu, pipe_cpu, day_cpu = (
            b.get("insert_cpu_seconds"),
            p.get("insert_cpu_seconds"),
            _phase_cpu_total(p),
        )
        print(
            f"{r['day']:<10} {r['rows']:>10,} | {_secs(bare_cpu):>17} {_secs(same_cpu):>11} "
            f"{_secs(pipe_cpu):>17} {_secs(day_cpu):>14} | {_ratio(bare_cpu, pipe_cpu):>13} "
            f"{_ratio(same_cpu, pipe_cpu):>14} {_ratio(bare_cpu, day_cpu):>13}"
        )
    print(
        "\ncpu = user + system CPU of the process (engine threads included) during the INSERT,"
        "\n      or, for 'pipe day', summed over every phase of the day (load_phases metadata);"
        "\nratio cpu = bare cpu / pipeline cpu for the same rows (1.0 = no overhead);"
        f"\ntarget: pipe INSERT cpu <= {CPU_TARGET} x bare INSERT cpu (ratio cpu ins >= "
        f"{1 / CPU_TARGET:.2f})."
    )


def summarize_phases(results: list[dict]) -> None:
    days = [r for r in results if (r.get("pipeline") or {}).get("phases")]
    if not days:
        return

    names: list[str] = []
    for r in days:
        for name in r["pipeline"]["phases"]["wall_seconds"]:
            if name not in names:
                names.append(name)
    names = phases_in_order(names)
    print("\nphases of the pipeline's day (load_phases metadata): wall s / process CPU s")
    print(f"{'phase':<20} " + " ".join(f"{r['day']:>19}" for r in days))
    for name in names:
        cells = []
        for r in days:
            phases = r["pipeline"]["phases"]
            wall = phases["wall_seconds"].get(name)
            cpu = phases["process_cpu_seconds"].get(name)
            cells.append(f"{_secs(wall):>9}/{_secs(cpu):<9}")
        print(f"{name:<20} " + " ".join(cells))


def summarize_timelines(results: list[dict]) -> None:
    days = [r for r in results if (r.get("pipeline") or {}).get("timeline")]
    if not days:
        return
    print("\nthe pipeline process, launch to exit (wall s; Dagster event timestamps)")
    steps = list(days[0]["pipeline"]["timeline"])
    print(f"{'span':<38} " + " ".join(f"{r['day']:>10}" for r in days))
    for step in steps:
        cells = [_secs(r["pipeline"]["timeline"].get(step)) for r in days]
        print(f"{step:<38} " + " ".join(f"{c:>10}" for c in cells))


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ratio(numerator: float | None, denominator: float | None) -> str:
    return "-" if not numerator or not denominator else f"{numerator / denominator:.2f}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_bare"]:
        worker_bare(*argv[1:4])
        return 0
    if argv[:1] == ["_inspect"]:
        worker_inspect(*argv[1:3])
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_load",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--days", type=int, default=2, help="days of --rows rows (default 2)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of a normal day")
    parser.add_argument(
        "--big-rows", type=int, default=5_000_000, help="rows of the one extra big day (0: none)"
    )
    parser.add_argument("--rows-per-file", type=int, default=250_000)
    parser.add_argument("--start-date", default="2026-11-01")
    parser.add_argument("--workdir", type=Path, help="kept between runs (data is reused)")
    parser.add_argument("--only", choices=("both", "pipeline", "bare"), default="both")
    parser.add_argument(
        "--settle",
        type=float,
        default=DEFAULT_SETTLE_SECONDS,
        help="seconds of quiet (after a sync) before each run",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=DEFAULT_REPEAT,
        help="runs of each side per day, alternating which goes first; the median is "
        "reported (default 3)",
    )
    parser.add_argument(
        "--bare-from",
        type=Path,
        help="take the bare figures from an earlier JSON instead of re-running",
    )
    parser.add_argument(
        "--project-root",
        type=Path,
        default=REPO_ROOT,
        help="run the pipeline from this copy of the project (put first on "
        "PYTHONPATH), e.g. to try other INSERT_SETTINGS",
    )
    parser.add_argument(
        "--no-insert-hook", action="store_true", help="do not time the pipeline's INSERT alone"
    )
    parser.add_argument(
        "--fresh-schema",
        action="store_true",
        help="do not apply the schema before the pipeline's run (its step then applies it)",
    )
    parser.add_argument(
        "--keep-engines",
        action="store_true",
        help="keep each day's chDB directories in the workdir (they are as large as the data)",
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench-results" / "bench.json")
    args = parser.parse_args(argv)
    args.project_root = args.project_root.resolve()

    total_started = time.monotonic()
    work = args.workdir.resolve() if args.workdir else Path(tempfile.mkdtemp(prefix="atlas-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    exports = work / "exports"
    plan = _day_plan(args)
    print(f"workdir {work}\ngenerating {len(plan)} days of {DOMAIN} exports", flush=True)
    days = generate(exports, plan, args.rows_per_file)
    tenants_yaml = work / "tenants.yaml"
    write_tenants(tenants_yaml, exports, plan)
    home = work / "dagster_home"
    home.mkdir(exist_ok=True)
    shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    hook = work / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(INSERT_HOOK)
    path_entries = [] if args.no_insert_hook else [str(hook)]
    if args.project_root != REPO_ROOT:
        path_entries.append(str(args.project_root))
    base_env = dict(os.environ) | {
        "DAGSTER_HOME": str(home),
        "ATLAS_TENANTS_FILE": str(tenants_yaml),
    }
    if path_entries:
        base_env["PYTHONPATH"] = os.pathsep.join(
            [*path_entries, *filter(None, [os.environ.get("PYTHONPATH")])]
        )
    earlier = {}
    if args.bare_from:
        earlier = {r["day"]: r.get("bare") for r in json.loads(args.bare_from.read_text())["days"]}

    results = []
    for day in days:
        record = {k: day[k] for k in ("day", "rows", "files", "bytes")}
        pipelines, bares, bares_same = measure_day(day, work, args, base_env)
        if pipelines:
            record["pipeline"] = median_run(pipelines, "load_step_seconds")
            record["pipeline_repeats"] = [_repeat_figures(s) for s in pipelines]
        if bares:
            record["bare"] = median_run(bares, "insert_seconds")
            record["bare_repeats"] = [_repeat_figures(s) for s in bares]
        elif earlier.get(day["day"]):
            record["bare"] = earlier[day["day"]]
        if bares_same:
            record["bare_same_settings"] = median_run(bares_same, "insert_seconds")
            record["bare_same_repeats"] = [_repeat_figures(s) for s in bares_same]
        p, b = record.get("pipeline"), record.get("bare")
        if p and b:
            bare_rate = b["rows_per_s_insert"]
            record["ratio_load_step"] = p["rows_per_s_load_step"] / bare_rate
            record["ratio_insert"] = (p["rows_per_s_insert"] or 0) / bare_rate or None
            if record.get("bare_same_settings"):
                same_rate = record["bare_same_settings"]["rows_per_s_insert"]
                record["ratio_insert_same_settings"] = (p["rows_per_s_insert"] or 0) / same_rate
            pipe_rss = p["max_rss_time_v"]
            # The measure: the pipeline INSERT's CPU over the bare INSERT's (the whole
            # day's, engine open and checks included, is printed beside it).
            insert_cpu = p.get("insert_cpu_seconds")
            record["cpu_over_bare"] = insert_cpu / b["insert_cpu_seconds"] if insert_cpu else None
            record["checks"] = {
                f"ratio_load>={RATIO_TARGET}": record["ratio_load_step"] >= RATIO_TARGET,
                f"cpu<={CPU_TARGET}x": (record["cpu_over_bare"] or 99) <= CPU_TARGET,
                "rss<=bare+300MB": pipe_rss <= b["max_rss_time_v"] + RSS_SLACK_MB * MB,
            }
        results.append(record)

    summarize(results)
    import chdb

    document = {
        "generated_at": dt.datetime.now(dt.UTC).isoformat(),
        "machine": {"cpus": os.cpu_count(), "chdb": chdb.__version__},
        "project_root": str(args.project_root),
        "pipeline_insert_settings": next(
            (r["pipeline"]["insert_settings"] for r in results if r.get("pipeline")), None
        ),
        "throughput_basis": {
            "pipeline_load_step": "rows_loaded / (backfill_log completed.updated_at - started_at)",
            "pipeline_insert": "rows_loaded / seconds of the inbound INSERT (sitecustomize hook)",
            "bare": "rows / seconds of the bare INSERT SELECT",
        },
        "rss_basis": "max_rss_time_v = /usr/bin/time -v Maximum resident set size (bytes)",
        "bare_statement_settings": BARE_ENGINE_SETTINGS,
        "bare_same_settings_statement_settings": pipeline_settings_sql(),
        "pipeline_schema": "applied inside the step (--fresh-schema)"
        if args.fresh_schema
        else "applied before the run by atlas-dagster init-db, as the bare run applies it first",
        "cpu_basis": "getrusage(RUSAGE_SELF) user+system of the loading process, engine threads "
        "included: bare around its INSERT; pipeline per phase (load_phases metadata)",
        "days": results,
        "total_seconds": time.monotonic() - total_started,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2, default=str))
    print(f"\nwrote {args.out} (total {document['total_seconds']:.0f}s)")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
