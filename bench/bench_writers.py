"""Real writers' exports: what each tool's defaults give with `atlas-dagster load`, and what their
types cost the INSERT beside the bare engine.

Part 1 (outcomes): for every writer of testkit/export_writers.py (DuckDB, polars,
pandas with pyarrow and fastparquet, pyarrow's forms no tool writes at will, a complete export with
an empty day) and for real Spark's two ways of testkit/spark_exports.py (its defaults
partitioned by the tenant columns; a warehouse-shaped job per tenant with integer ids), 2 days x 4
domains are written and loaded by the `atlas-dagster load` command in its own process, on a fresh
engine and Dagster instance, as a new user would; the table says whether it loaded, how many
tenant-day-domains completed with exactly the export's distinct events, and the command's wall
time. Spark needs Java (scripts/ensure-system-deps).

Part 2 (cost): one casino day of --rows rows in --files files, written in each way a tool types
it (the contract's µs + DECIMAL(18,4); pandas' ns + double; INT96 + DECIMAL(38,4); BigQuery's
NUMERIC (38,9); integer ids; the tenant columns only in the folder names, as Spark's partitionBy
writes them), loaded --repeat times by the pipeline's INSERT (`load_day`, its insert_seconds:
guards and the Null table + bridge view included) and by a bare INSERT ... SELECT from file()
into the raw table, with the engine's defaults ("bare") and with the pipeline's own INSERT
settings ("bare*", as bench_load), each in its own process on a fresh engine, alternating whether
the pipeline goes first (bench/protocol.py); medians printed side by side. For the folder form
the bare sides read the tenant columns as the engine itself does, with use_hive_partitioning = 1.

    .venv/bin/python -m bench.bench_writers [--rows 1000000] [--files 4] [--repeat 3]
                                            [--skip-outcomes] [--skip-cost]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.bench_load import (
    BARE_COLUMNS,
    BARE_ENGINE_SETTINGS,
    BARE_SELECT,
    pipeline_settings_sql,
)
from bench.protocol import DEFAULT_REPEAT, json_worker, median_run, settle, sides_in_order

REPO_ROOT = Path(__file__).resolve().parents[1]
WORK = REPO_ROOT / ".bench-work" / "writers"
RESULTS = REPO_ROOT / "bench-results"
ATLAS = Path(sys.executable).parent / "atlas-dagster"
COST_DAY = dt.date(2026, 9, 7)
# The ways a casino day's types are written (timestamp unit or INT96, the money type).
SIDES = ("pipeline", "bare", "bare*")
COST_FORMATS = (
    "contract-us-decimal18",
    "pandas-ns-double",
    "int96-decimal38",
    "bq-decimal38-9",
    "int64-ids",
    "tenant-in-folders",
)
# The forms whose tenant columns the bare INSERT reads from the folder names, as the engine does.
HIVE_FORMS = ("tenant-in-folders",)
SPARK_FORMS = ("spark-defaults-partitioned-by-tenant", "spark-warehouse-integer-ids")


def _tenant(org: str, source: Path, first: dt.date, last: dt.date):
    from atlas_dagster.domains import DOMAINS
    from atlas_dagster.tenants import Tenant

    return Tenant(org, "main", f"file://{source}", first, last, tuple(DOMAINS))


def _env(work: Path, tenant) -> dict[str, str]:
    from testkit.dagster_stack import DAGSTER_YAML, write_tenants

    home = work / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(DAGSTER_YAML.read_text())
    tenants = write_tenants(work / "tenants.yaml", [tenant])
    return dict(
        os.environ,
        DAGSTER_HOME=str(home),
        ATLAS_TENANTS_FILE=str(tenants),
        ATLAS_CLICKHOUSE_DSN=f"chdb://{work / 'clickhouse'}",
    )


def outcome(writer: str) -> dict:
    """One writer's 2 days x 4 domains through `atlas-dagster load` in its own process."""
    import clickhouse_connect

    from atlas_dagster.cli.demo_data import arrow_table
    from atlas_dagster.domains import DOMAINS
    from testkit import gold_reference
    from testkit.export_writers import DAYS, ROWS, WRITERS
    from testkit.gold_support import generated

    work = WORK / "outcomes" / writer
    shutil.rmtree(work, ignore_errors=True)
    tenant = _tenant(writer.replace("-", "")[:60], work / "exports", DAYS[0], DAYS[-1])
    for domain in DOMAINS:
        for day in DAYS:
            table = arrow_table(domain, generated(tenant, domain, day, ROWS))
            WRITERS[writer](tenant, domain, day, table)
    env = _env(work, tenant)
    started = time.monotonic()
    done = subprocess.run(
        [str(ATLAS), "load", "--org", tenant.organization_id, "--brand", "main"],
        env=env, cwd=work, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    wall = time.monotonic() - started
    client = clickhouse_connect.get_client(dsn=env["ATLAS_CLICKHOUSE_DSN"])
    logged = client.query(
        "SELECT domain, partition_date, status, rows_loaded FROM atlas.backfill_log FINAL"
    ).result_rows
    client.close()
    exact = sum(
        1
        for domain, day, status, rows in logged
        if status == "completed" and rows == len(gold_reference.events(tenant, domain, [day]))
    )
    errors = [line for line in done.stderr.splitlines() if "atlas-dagster:" in line]
    return {
        "writer": writer,
        "exit": done.returncode,
        "exact": exact,
        "units": len(DOMAINS) * len(DAYS),
        "wall_seconds": wall,
        "error": errors[-1] if errors else "",
    }


def spark_outcomes() -> list[dict]:
    """Real Spark's two ways (one session for both), 2 days x 4 domains each, then `atlas-dagster
    load` for each tenant in its own process."""
    import clickhouse_connect

    from atlas_dagster.domains import DOMAINS
    from testkit.export_writers import DAYS, ROWS
    from testkit.gold_support import generated
    from testkit.spark_exports import (
        spark_session,
        write_spark_defaults,
        write_warehouse_style,
    )

    work = WORK / "outcomes" / "spark"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    defaults = _tenant("sparkdefaults", work / "databricks", DAYS[0], DAYS[-1])
    warehouse = _tenant("sparkwarehouse", work / "warehouse", DAYS[0], DAYS[-1])
    expected: dict[tuple, int] = {}
    with spark_session(work) as spark:
        for domain in DOMAINS:
            rows = {t.key: [] for t in (defaults, warehouse)}
            for tenant in (defaults, warehouse):
                for day in DAYS:
                    day_rows = generated(tenant, domain, day, ROWS)
                    expected[(tenant.key, domain, day)] = len(day_rows)
                    rows[tenant.key] += day_rows
            write_spark_defaults(spark, work / "databricks", domain, rows[defaults.key])
            write_warehouse_style(spark, warehouse, domain, rows[warehouse.key])
    results = []
    for form, tenant in zip(SPARK_FORMS, (defaults, warehouse), strict=True):
        env = _env(work / form, tenant)
        started = time.monotonic()
        done = subprocess.run(
            [str(ATLAS), "load", "--org", tenant.organization_id, "--brand", "main"],
            env=env, cwd=work, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        wall = time.monotonic() - started
        client = clickhouse_connect.get_client(dsn=env["ATLAS_CLICKHOUSE_DSN"])
        logged = client.query(
            "SELECT domain, partition_date, status, rows_loaded FROM atlas.backfill_log FINAL"
        ).result_rows
        client.close()
        exact = sum(
            1
            for domain, day, status, loaded in logged
            if status == "completed" and loaded == expected[(tenant.key, domain, day)]
        )
        errors = [line for line in done.stderr.splitlines() if "atlas-dagster:" in line]
        results.append(
            {
                "writer": form,
                "exit": done.returncode,
                "exact": exact,
                "units": len(DOMAINS) * len(DAYS),
                "wall_seconds": wall,
                "error": errors[-1] if errors else "",
            }
        )
    return results


def _retype(table, name: str, to):
    import pyarrow as pa

    index = table.schema.get_field_index(name)
    return table.set_column(index, pa.field(name, to), table.column(name).cast(to))


def _cost_table(form: str, rows: int):
    import pyarrow as pa
    import pyarrow.compute as pc

    from testkit.bulk_exports import bulk_table

    tenant = _tenant("cost", WORK / "cost" / form / "exports", COST_DAY, COST_DAY)
    table = bulk_table(tenant, "casino", COST_DAY, 0, rows)
    if form == "pandas-ns-double":
        table = _retype(table, "event_timestamp", pa.timestamp("ns", tz="UTC"))
        table = _retype(table, "amount", pa.float64())
    elif form == "int96-decimal38":
        table = _retype(table, "amount", pa.decimal128(38, 4))
    elif form == "bq-decimal38-9":
        table = _retype(table, "amount", pa.decimal128(38, 9))
    elif form == "int64-ids":
        for name in ("user_id", "bet_id", "game_id"):
            digits = pc.replace_substring_regex(table.column(name), r"\D", "")
            index = table.schema.get_field_index(name)
            table = table.set_column(index, pa.field(name, pa.int64()), digits.cast(pa.int64()))
    elif form == "tenant-in-folders":
        table = table.drop_columns(["organization_id", "brand_id"])
    return tenant, table


def write_cost_day(form: str, rows: int, files: int) -> str:
    import pyarrow.parquet as pq

    from atlas_dagster.exports.layout import day_folder

    tenant, table = _cost_table(form, rows)
    folder = Path(day_folder(tenant, "casino", COST_DAY)[len("file://") :])
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    chunk = -(-rows // files)
    for index in range(files):
        pq.write_table(
            table.slice(index * chunk, chunk),
            folder / f"part-{index}.parquet",
            use_deprecated_int96_timestamps=form.startswith("int96"),
        )
    return str(folder)


def worker_pipeline(form: str, dsn: str) -> None:
    """The pipeline's load of the day on a fresh engine: its INSERT's seconds."""
    from atlas_dagster.domains import DOMAINS
    from atlas_dagster.resources.clickhouse import ClickHouseResource
    from atlas_dagster.resources.schema import ensure_schema
    from testkit.load_support import load_day

    clickhouse = ClickHouseResource(dsn=dsn)
    with clickhouse.session() as client:
        ensure_schema(client)
    tenant = _tenant("cost", WORK / "cost" / form / "exports", COST_DAY, COST_DAY)
    loaded = load_day(clickhouse, tenant, DOMAINS["casino"], COST_DAY, "bench")
    print(json.dumps({"rows": loaded.rows_loaded, "insert_seconds": loaded.insert_seconds}))


def worker_bare(folder: str, dsn: str, settings: str) -> None:
    """A bare INSERT ... SELECT from file() into the raw table with the given settings."""
    import clickhouse_connect

    from atlas_dagster.resources.schema import apply_schema

    client = clickhouse_connect.get_client(dsn=dsn)
    apply_schema(client)
    started = time.monotonic()
    client.command(
        f"INSERT INTO atlas.tbt_raw_events_casino ({BARE_COLUMNS}) SELECT {BARE_SELECT} "
        f"FROM file('{folder}/*.parquet', 'Parquet') SETTINGS {settings}"
    )
    seconds = time.monotonic() - started
    rows = int(client.command("SELECT count() FROM atlas.tbt_raw_events_casino"))
    print(json.dumps({"rows": rows, "insert_seconds": seconds}))


def _side(side: str, form: str, folder: str, attempt: int) -> dict:
    engine = WORK / "cost" / form / f"{side.replace('*', '-star')}-{attempt}"
    shutil.rmtree(engine, ignore_errors=True)
    dsn = f"chdb://{engine}"
    if side == "pipeline":
        arguments = ["_pipeline", form, dsn]
    else:
        settings = pipeline_settings_sql() if side == "bare*" else BARE_ENGINE_SETTINGS
        if form in HIVE_FORMS:
            settings = settings.replace("use_hive_partitioning = 0", "use_hive_partitioning = 1")
        arguments = ["_bare", folder, dsn, settings]
    return json_worker("bench.bench_writers", arguments, REPO_ROOT, timeout=900)


def measure_cost(form: str, args: argparse.Namespace) -> dict:
    """The three sides, --repeat times each, alternating whether the pipeline goes first."""
    folder = write_cost_day(form, args.rows, args.files)
    runs: dict[str, list[dict]] = {side: [] for side in SIDES}
    for attempt in range(args.repeat):
        pipeline_first = sides_in_order(attempt, "pipeline", "bare")[0] == "pipeline"
        order = SIDES if pipeline_first else (*SIDES[1:], SIDES[0])
        for side in order:
            settle(args.settle)
            runs[side].append(_side(side, form, folder, attempt))
    row: dict = {"form": form}
    for side, side_runs in runs.items():
        median = median_run(side_runs, "insert_seconds")
        row[side] = {
            "rows": median["rows"],
            "seconds": median["insert_seconds"],
            "runs": [r["insert_seconds"] for r in side_runs],
        }
    return row


def _print_outcomes(report: dict) -> None:
    from testkit.export_writers import WRITERS

    print(f"{'writer':45}  {'exit':>4}  {'exact':>7}  {'wall s':>6}  error")
    rows = [
        json_worker("bench.bench_writers", ["_outcome", writer], REPO_ROOT, timeout=900)
        for writer in sorted(WRITERS)
    ]
    rows += json_worker("bench.bench_writers", ["_spark"], REPO_ROOT, timeout=1800)
    for row in rows:
        report["outcomes"].append(row)
        exact = f"{row['exact']}/{row['units']}"
        wall = f"{row['wall_seconds']:6.1f}"
        print(f"{row['writer']:45}  {row['exit']:>4}  {exact:>7}  {wall}  {row['error']}")


def _print_cost(report: dict, args: argparse.Namespace) -> None:
    print(f"\n{args.rows:,} casino rows in {args.files} files, INSERT seconds, medians")
    print("(bare: the engine's defaults; bare*: the pipeline's INSERT settings, no guards or view)")
    print(f"{'written as':24}  {'pipeline':>8}  {'bare':>6}  {'bare*':>6}  runs per side")
    for form in COST_FORMATS:
        row = measure_cost(form, args)
        report["cost"].append(row)
        assert len({row[side]["rows"] for side in SIDES}) == 1, row  # every side loaded it all
        widths = {"pipeline": 8, "bare": 6, "bare*": 6}
        figures = "  ".join(f"{row[side]['seconds']:{widths[side]}.2f}" for side in SIDES)
        runs = " | ".join(" ".join(f"{s:.2f}" for s in row[side]["runs"]) for side in SIDES)
        print(f"{form:24}  {figures}  {runs}")


WORKERS = {
    "_pipeline": worker_pipeline,
    "_bare": worker_bare,
    "_outcome": lambda writer: print(json.dumps(outcome(writer))),
    "_spark": lambda: print(json.dumps(spark_outcomes())),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in WORKERS:
        WORKERS[argv[0]](*argv[1:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT)
    parser.add_argument("--settle", type=float, default=2.0)
    parser.add_argument("--skip-outcomes", action="store_true")
    parser.add_argument("--skip-cost", action="store_true")
    args = parser.parse_args(argv)
    report: dict = {"outcomes": [], "cost": []}
    if not args.skip_outcomes:
        _print_outcomes(report)
    if not args.skip_cost:
        _print_cost(report, args)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"writers-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}.json"
    out.write_text(json.dumps(report, indent=2, default=str))
    print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
