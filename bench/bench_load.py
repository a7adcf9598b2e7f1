"""Load benchmark: the Dagster pipeline (Null inbound + bridge MV) against a bare chDB INSERT.

Run with `.venv/bin/python -m bench.bench_load` (the `make bench` target). On the same data:

* generates N days of >= 1M casino rows plus one 5M-row day (numpy/pyarrow, vectorised) as
  several Parquet files per day in the export layout, and a tenants YAML for bench.main;
* (a) pipeline: one `dagster asset materialize ... --partition "DAY|bench.main"` process per
  day, under /usr/bin/time -v, with its process tree's RSS polled from /proc;
* (b) bare engine: one python process per day that opens chDB on a fresh directory, applies
  the schema and runs INSERT INTO atlas.tbt_raw_events_casino SELECT ... FROM file(...).

Throughput of the pipeline is given two ways: over the load step (backfill_log started_at ->
updated_at of the 'completed' row: listing, footer checks, sample, clear, INSERT, count FINAL)
and over the INSERT statement alone (timed in the step process by a sitecustomize hook that
the benchmark writes into its own temporary directory). The bare figure is the INSERT alone.
Results: a table on stdout and JSON in bench-results/bench.json.
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

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
DOMAIN = "casino"
ASSET = "tbt_raw_events_casino"
ORG, BRAND = "bench", "main"
TENANT_KEY = f"{ORG}.{BRAND}"
MB = 1024 * 1024
RSS_SLACK_MB = 300
RATIO_TARGET = 0.9

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


def _day_dir(exports: Path, day: dt.date) -> Path:
    return (
        exports
        / DOMAIN
        / f"organization_id={ORG}"
        / f"brand_id={BRAND}"
        / f"year={day:%Y}"
        / f"month={day:%m}"
        / f"day={day:%d}"
    )


def _casino_chunk(day: dt.date, lo: int, hi: int, seed: int):
    """Rows lo..hi of the day as an Arrow table with the export contract's schema."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from atlas_dagster.demo_data import CURRENCIES, arrow_table

    schema = arrow_table(DOMAIN, []).schema
    n = hi - lo
    rng = np.random.default_rng([seed, day.toordinal(), lo])
    index = pa.array(np.arange(lo, hi, dtype=np.int64))

    def prefixed(prefix: str, values) -> pa.Array:
        return pc.binary_join_element_wise(prefix, pc.cast(values, pa.string()), "")

    def pick(choices, p=None) -> pa.Array:
        return pa.array(list(choices)).take(pa.array(rng.choice(len(choices), n, p=p)))

    day_ms = int(dt.datetime.combine(day, dt.time(), dt.UTC).timestamp() * 1000)
    stamps = day_ms + rng.integers(0, 86_400_000, n, dtype=np.int64)
    # decimal128(18, 4) built from its unscaled int128 values (whole cents, so scale 4 is exact).
    unscaled = np.zeros((n, 2), dtype=np.int64)
    unscaled[:, 0] = rng.integers(50, 20_000, n, dtype=np.int64) * 100
    amount = pa.Array.from_buffers(
        pa.decimal128(18, 4), n, [None, pa.py_buffer(unscaled.tobytes())]
    )
    columns = {
        "event_id": prefixed(f"cas-{day:%Y%m%d}-", index),
        "event_type": pick(("open", "win", "lose"), p=(0.5, 0.225, 0.275)),
        "event_timestamp": pa.array(stamps, type=pa.timestamp("ms", tz="UTC")),
        "organization_id": pa.repeat(ORG, n),
        "brand_id": pa.repeat(BRAND, n),
        "user_id": prefixed("u", pa.array(rng.integers(0, 200_000, n))),
        "bet_id": prefixed(f"cb-{day:%Y%m%d}-", pc.divide(index, 2)),
        "game_id": prefixed("slot-", pa.array(rng.integers(0, 40, n))),
        "amount": amount,
        "currency": pick(CURRENCIES),
    }
    return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


def generate(exports: Path, plan: list[tuple[dt.date, int]], rows_per_file: int) -> list[dict]:
    import pyarrow.parquet as pq

    days = []
    for day, rows in plan:
        folder = _day_dir(exports, day)
        marker = folder / ".bench-rows"
        files = -(-rows // rows_per_file)
        if marker.exists() and marker.read_text() == f"{rows}/{files}":
            print(f"  {day}: reusing {rows:,} rows in {files} files", flush=True)
        else:
            started = time.monotonic()
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            for i in range(files):
                lo, hi = i * rows_per_file, min(rows, (i + 1) * rows_per_file)
                pq.write_table(_casino_chunk(day, lo, hi, seed=42), folder / f"part-{i}.parquet")
            marker.write_text(f"{rows}/{files}")
            print(
                f"  {day}: wrote {rows:,} rows in {files} files "
                f"({time.monotonic() - started:.1f}s)",
                flush=True,
            )
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
    started = time.monotonic()
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
        "max_rss_time_v": _time_v_max_rss(time_file),
        "peak_tree_rss_polled": poller.peak_tree,
        "peak_process_rss_polled": poller.peak_single,
        "log": str(log),
    }


def _worker(args: list[str], env: dict | None = None, cwd: Path = REPO_ROOT) -> dict:
    completed = subprocess.run(
        [sys.executable, "-m", "bench.bench_load", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"worker {args[0]} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


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
    inserts = (
        [json.loads(line) for line in timings.read_text().splitlines()]
        if (timings.exists())
        else []
    )
    rows = inspected["rows_loaded"]
    load_s = inspected["load_step_seconds"]
    insert_s = inserts[-1]["seconds"] if inserts else None
    return (
        measured
        | inspected
        | {
            "insert_seconds": insert_s,
            "rows_per_s_load_step": rows / load_s,
            "rows_per_s_insert": rows / insert_s if insert_s else None,
        }
    )


def run_bare(day: dict, work: Path) -> dict:
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
    ]
    measured = run_measured(cmd, dict(os.environ), REPO_ROOT, ch_dir.parent / "bare.log", 900)
    if measured["returncode"] != 0:
        raise RuntimeError(f"bare load failed:\n{Path(measured['log']).read_text()[-3000:]}")
    result = json.loads(Path(measured["log"]).read_text().strip().splitlines()[-1])
    return measured | result | {"rows_per_s_insert": result["rows"] / result["insert_seconds"]}


# --------------------------------------------------------------------------- workers


def worker_bare(dsn: str, glob: str) -> None:
    """One bare INSERT SELECT from file() into the raw table, on a fresh chDB directory."""
    import clickhouse_connect

    from atlas_dagster.resources.clickhouse import apply_schema

    client = clickhouse_connect.get_client(dsn=dsn)
    apply_schema(client)
    rss_before = _rss_bytes(os.getpid())
    statement = (
        f"INSERT INTO atlas.{ASSET} ({BARE_COLUMNS}) SELECT {BARE_SELECT} "
        f"FROM file('{glob}', 'Parquet') SETTINGS use_hive_partitioning = 0"
    )
    started = time.monotonic()
    client.command(statement)
    insert_seconds = time.monotonic() - started
    rows = int(client.command(f"SELECT count() FROM atlas.{ASSET}"))
    client.close()
    print(
        json.dumps(
            {
                "rows": rows,
                "insert_seconds": insert_seconds,
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
    from atlas_dagster.loading import inbound

    print(
        json.dumps(
            {
                "insert_settings": inbound.INSERT_SETTINGS,
                "atlas_dagster_from": inbound.__file__,
                "rows_loaded": int(row["rows_loaded"]),
                "source_rows": int(row["source_rows"]),
                "raw_rows_final": raw,
                "load_step_seconds": (row["updated_at"] - row["started_at"]).total_seconds(),
                "materialization_duration_seconds": metadata["duration_seconds"].value
                if "duration_seconds" in metadata
                else None,
                "materialization_partition": str(partition),
            }
        )
    )


# --------------------------------------------------------------------------- report


def _mb(value: int | None) -> str:
    return "-" if value is None else f"{value / MB:,.0f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def summarize(results: list[dict]) -> None:
    header = (
        f"{'day':<10} {'rows':>10} {'files':>5} | {'pipe r/s load':>13} {'pipe r/s ins':>12} "
        f"{'bare r/s':>11} | {'ratio load':>10} {'ratio ins':>9} | {'RSS pipe MB':>11} "
        f"{'(tree)':>7} {'RSS bare MB':>11} | checks"
    )
    print("\n" + header + "\n" + "-" * len(header))
    for r in results:
        p, b = r.get("pipeline"), r.get("bare")
        checks = r.get("checks", {})
        flags = " ".join(f"{k}={'ok' if v else 'FAIL'}" for k, v in checks.items())
        print(
            f"{r['day']:<10} {r['rows']:>10,} {r['files']:>5} | "
            f"{_rate(p and p['rows_per_s_load_step']):>13} "
            f"{_rate(p and p['rows_per_s_insert']):>12} "
            f"{_rate(b and b['rows_per_s_insert']):>11} | "
            f"{r.get('ratio_load_step', 0) or 0:>10.2f} {r.get('ratio_insert', 0) or 0:>9.2f} | "
            f"{_mb(p and p['max_rss_time_v']):>11} {_mb(p and p['peak_tree_rss_polled']):>7} "
            f"{_mb(b and b['max_rss_time_v']):>11} | {flags}"
        )
    print(
        "\npipe r/s load = rows_loaded / (backfill_log updated_at - started_at) of the load step;"
        "\npipe r/s ins  = rows_loaded / time of the inbound INSERT statement alone;"
        "\nbare r/s      = rows / time of the bare INSERT SELECT alone;"
        "\nRSS pipe      = /usr/bin/time -v max RSS (largest process: the step subprocess);"
        "\n(tree)        = peak of the summed RSS of the dagster process tree (/proc polling)."
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_bare"]:
        worker_bare(*argv[1:3])
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
        if args.only in ("both", "pipeline"):
            print(f"pipeline {day['day']} ({day['rows']:,} rows) ...", flush=True)
            record["pipeline"] = run_pipeline(day, work, args, base_env)
            if record["pipeline"]["rows_loaded"] != day["rows"]:
                raise RuntimeError(f"pipeline loaded {record['pipeline']['rows_loaded']} rows")
        if args.only in ("both", "bare") and not args.bare_from:
            print(f"bare     {day['day']} ({day['rows']:,} rows) ...", flush=True)
            record["bare"] = run_bare(day, work)
        elif earlier.get(day["day"]):
            record["bare"] = earlier[day["day"]]
        p, b = record.get("pipeline"), record.get("bare")
        if p and b:
            bare_rate = b["rows_per_s_insert"]
            record["ratio_load_step"] = p["rows_per_s_load_step"] / bare_rate
            record["ratio_insert"] = (p["rows_per_s_insert"] or 0) / bare_rate or None
            pipe_rss = p["max_rss_time_v"]
            record["checks"] = {
                "ratio_load>=0.9": record["ratio_load_step"] >= RATIO_TARGET,
                "ratio_ins>=0.9": (record["ratio_insert"] or 0) >= RATIO_TARGET,
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
        "bare_statement_settings": "defaults + use_hive_partitioning = 0",
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
