"""Verify benchmark: the raw checks of one tenant over a long window, beside the bare engine.

Run with `.venv/bin/python -m bench.bench_verify [--days 1096] [--rows 2] [--cli sqlite,postgres]
[--load] [--project-root DIR]`, or `make bench BENCH=verify`. One tenant
(file source, tiny exports: --rows rows in one file per tenant-day-domain) over --days days × 4
domains, loaded into a fresh embedded engine through the inbound tables (one INSERT per domain)
with a completed backfill_log row per day. Timed, in this process:

* `window_outcomes` per domain over the whole window (what `verify` runs inside its step: the
  log and raw counts, the listing, footers, contract and row rules of every day's export);
* the bare engine reading the same files once: `SELECT _path, count() … GROUP BY _path` over
  the domain's window, the floor of any re-read of the exports.

With --cli sqlite,postgres, then `atlas-dagster verify --layer raw` of the tenant end to end (its
check runs, their evaluations stored in a fresh Dagster instance on SQLite, then on a real
PostgreSQL, the printed table). Wall and CPU seconds (CPU includes the engine's threads: the
machine is shared), and per tenant-day-domain milliseconds.

With --load, the window is loaded the way an operator loads it instead: `atlas-dagster load` of
the whole window (one ranged run, timed end to end), then `atlas-dagster verify --layer raw` on
the same instance and engine, in the same invocation: verify's cost as a share of the load's.
--project-root runs both commands from another copy of the project (put first on PYTHONPATH),
e.g. `git archive` of an older commit, for a before/after in the same conditions.
Results: a table on stdout and one JSON document appended to bench-results/verify.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.bench_fleet_backfill import (
    ALL_DOMAINS,
    LAST_DAY,
    REPO_ROOT,
    load_verified_tenant,
    tenant_entries,
    timed_cli,
    write_exports,
)


def _timed(action) -> tuple[float, float, Any]:
    wall, cpu = time.monotonic(), time.process_time()
    result = action()
    return time.monotonic() - wall, time.process_time() - cpu, result


def _row(what: str, wall: float, cpu: float, units: int, result: str) -> dict[str, Any]:
    return {
        "what": what,
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "ms_per_day_domain": round(1000 * wall / units, 2),
        "result": result,
    }


def bench_in_process(clickhouse, tenant, days: list[dt.date]) -> list[dict[str, Any]]:
    from atlas_dagster.checks.raw import window_outcomes
    from atlas_dagster.domains import DOMAINS

    rows = []
    totals = [0.0, 0.0, 0, 0]  # wall, cpu, checks, failed
    with clickhouse.kept_open():
        for name in ALL_DOMAINS:
            domain = DOMAINS[name]
            wall, cpu, outcomes = _timed(
                lambda d=domain: [
                    o for _, day in window_outcomes(clickhouse, tenant, d, days) for o in day
                ]
            )
            failed = [o for o in outcomes if not o.passed]
            totals = [
                totals[0] + wall,
                totals[1] + cpu,
                totals[2] + len(outcomes),
                totals[3] + len(failed),
            ]
            bare_wall, bare_cpu, files = _timed(lambda d=domain: _bare_read(clickhouse, tenant, d))
            rows.append(
                _row(
                    f"window_outcomes {name}",
                    wall,
                    cpu,
                    len(days),
                    f"{len(outcomes)} checks, {len(failed)} failed",
                )
            )
            rows.append(
                _row(
                    f"bare engine {name}",
                    bare_wall,
                    bare_cpu,
                    len(days),
                    f"{files} files read once",
                )
            )
            print(f"  {rows[-2]}\n  {rows[-1]}", flush=True)
    rows.append(
        _row(
            "window_outcomes, 4 domains",
            totals[0],
            totals[1],
            4 * len(days),
            f"{totals[2]} checks, {totals[3]} failed",
        )
    )
    return rows


def _bare_read(clickhouse, tenant, domain) -> int:
    """Every file of the domain's window read once by the engine, one row per file."""
    root = tenant.source[len("file://") :]
    pattern = (
        f"{root}/{domain.name}/organization_id={tenant.organization_id}"
        f"/brand_id={tenant.brand_id}/*/*/*/*.parquet"
    )
    with clickhouse.session() as client:
        result = client.query(
            "SELECT _path, count() FROM file({pattern:String}, 'Parquet') GROUP BY _path",
            parameters={"pattern": pattern},
        )
    return len(result.result_rows)


@contextlib.contextmanager
def _instance_env(work: Path, tenants_file: Path, storage: str) -> Iterator[dict[str, str]]:
    """The variables of a fresh DAGSTER_HOME on SQLite (the default) or on a real PostgreSQL
    (the production configuration, dagster.postgres.yaml); the caller sets the engine's."""
    from testkit.dagster_stack import isolated_env
    from testkit.postgres_server import postgres_instance_yaml, postgres_server

    home = work / f"instance-{storage}"
    if storage == "sqlite":
        yield isolated_env(home, tenants_file)
        return
    with postgres_server() as server:
        yield isolated_env(home, tenants_file, server.env, postgres_instance_yaml())


def project_env(project_root: Path) -> dict[str, str]:
    """PYTHONPATH putting another copy of the project first (nothing when it is this one)."""
    if project_root.resolve() == REPO_ROOT:
        return {}
    return {"PYTHONPATH": os.pathsep.join([str(project_root.resolve()), *_pythonpath()])}


def _pythonpath() -> list[str]:
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def bench_load_then_verify(days: int, rows: int, project_root: Path) -> list[dict[str, Any]]:
    """`atlas-dagster load` of the window, then `verify --layer raw` of it, one instance."""
    from atlas_dagster.tenants import load_tenants
    from testkit.dagster_stack import isolated_env, write_tenants

    first = LAST_DAY - dt.timedelta(days=days - 1)
    window = [first + dt.timedelta(days=i) for i in range(days)]
    with tempfile.TemporaryDirectory(prefix="atlas-bench-verify-load-") as tmp:
        work = Path(tmp)
        source = f"file://{work / 'exports'}"
        tenants_file = write_tenants(
            work / "tenants.yaml", tenant_entries(1, first, LAST_DAY, source)
        )
        tenant = load_tenants(tenants_file)[0]
        env = isolated_env(work, tenants_file) | project_env(project_root)
        export_seconds = write_exports([tenant], window, rows)
        print(
            f"load then verify: {tenant.key} {first}..{LAST_DAY}, {days * 4:,} "
            f"tenant-day-domains of {rows} row(s), exports {export_seconds:.0f}s, "
            f"project {project_root}",
            flush=True,
        )
        org, brand = tenant.organization_id, tenant.brand_id
        wall, cpu, done = timed_cli(env, "load", "--org", org, "--brand", brand)
        said = done.stdout.strip().splitlines()[-1:] or done.stderr[-300:].splitlines()[-1:]
        load = _row("atlas-dagster load", wall, cpu, 4 * days, f"exit {done.returncode}: {said}")
        print(f"  {load}", flush=True)
        verify = _bench_cli(env, tenant, days, "sqlite")
        verify["what"] = "atlas-dagster verify --layer raw, after the load (same instance)"
        verify["share_of_load"] = round(verify["seconds"] / load["seconds"], 3)
        verify["cpu_share_of_load"] = round(verify["cpu_seconds"] / load["cpu_seconds"], 3)
        print(f"  verify / load: wall {verify['share_of_load']}, CPU {verify['cpu_share_of_load']}")
    return [load, verify]


def _bench_cli(env: dict[str, str], tenant, days: int, storage: str) -> dict[str, Any]:
    org, brand = tenant.organization_id, tenant.brand_id
    wall, cpu, done = timed_cli(env, "verify", "--org", org, "--brand", brand, "--layer", "raw")
    summary = [line for line in done.stdout.splitlines() if " passed, " in line]
    result = f"exit {done.returncode}: " + (summary[-1] if summary else done.stderr[-500:])
    row = _row(f"atlas-dagster verify --layer raw, {storage} instance", wall, cpu, 4 * days, result)
    print(f"  {row}", flush=True)
    return row


def run(days: int, rows: int, storages: list[str]) -> list[dict[str, Any]]:
    from atlas_dagster.resources.clickhouse import ClickHouseResource
    from atlas_dagster.resources.schema import ensure_schema
    from atlas_dagster.tenants import load_tenants
    from testkit.dagster_stack import isolated_env, write_tenants

    first = LAST_DAY - dt.timedelta(days=days - 1)
    window = [first + dt.timedelta(days=i) for i in range(days)]
    with tempfile.TemporaryDirectory(prefix="atlas-bench-verify-") as tmp:
        work = Path(tmp)
        source = f"file://{work / 'exports'}"
        tenants_file = write_tenants(
            work / "tenants.yaml", tenant_entries(1, first, LAST_DAY, source)
        )
        tenant = load_tenants(tenants_file)[0]
        env = isolated_env(work, tenants_file)
        export_seconds = write_exports([tenant], window, rows)
        clickhouse = ClickHouseResource(dsn=env["ATLAS_CLICKHOUSE_DSN"])
        with clickhouse.session() as client:
            ensure_schema(client)
            load_seconds = load_verified_tenant(client, tenant, first, LAST_DAY)
        print(
            f"verify data: {tenant.key} {first}..{LAST_DAY}, {days * 4:,} tenant-day-domains "
            f"of {rows} row(s): exports {export_seconds:.0f}s, raw and log {load_seconds:.1f}s",
            flush=True,
        )
        results = bench_in_process(clickhouse, tenant, window)
        for storage in storages:
            with _instance_env(work, tenants_file, storage) as storage_env:
                engine = {k: env[k] for k in ("ATLAS_HOME", "ATLAS_CLICKHOUSE_DSN")}
                results.append(_bench_cli(storage_env | engine, tenant, days, storage))
    return results


def render(results: list[dict[str, Any]]) -> str:
    lines = [
        "| what | wall s | CPU s | ms per tenant-day-domain (wall) | result |",
        "|---|---|---|---|---|",
    ]
    for row in results:
        lines.append(
            f"| {row['what']} | {row['seconds']} | {row['cpu_seconds']} "
            f"| {row['ms_per_day_domain']} | {row['result']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=1096, help="days in the window (3 years)")
    parser.add_argument("--rows", type=int, default=2, help="rows per tenant-day-domain")
    parser.add_argument(
        "--cli",
        default="",
        help="also time `atlas-dagster verify` end to end on these Dagster instances: "
        "sqlite, postgres or sqlite,postgres (default: none)",
    )
    parser.add_argument(
        "--load",
        action="store_true",
        help="load the window with `atlas-dagster load` (timed), then time `verify --layer raw` "
        "of it on the same SQLite instance: verify as a share of the load",
    )
    parser.add_argument(
        "--project-root",
        type=Path,
        default=REPO_ROOT,
        help="with --load: run the commands from this copy of the project (PYTHONPATH)",
    )
    args = parser.parse_args(argv)
    if args.load:
        results = bench_load_then_verify(args.days, args.rows, args.project_root)
    else:
        results = run(args.days, args.rows, [s for s in args.cli.split(",") if s])
    print(render(results))
    out = REPO_ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    with (out / "verify.json").open("a") as handle:
        arguments = vars(args) | {"project_root": str(args.project_root)}
        record = {"at": dt.datetime.now(dt.UTC).isoformat(), "args": arguments, "rows": results}
        handle.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
