"""What a crash costs: a backfill killed mid-load and resumed after a restart, against the same
backfill uncrashed (issue 30).

Run with `.venv/bin/python -m bench.bench_crash [--days 10 --rows 400000 --kill-after 5]`. On one
tenant, --days × casino + transactions of --rows rows (written once, reused by marker):

* uncrashed: `dagster dev` on a fresh instance and engine, the backfill launched through GraphQL
  as the UI does, timed from launch to its final status;
* crashed: the same on another fresh instance and engine, every process of the stack SIGKILLed
  once --kill-after day-domains are reported and a part is being written, `dagster dev` started
  again, timed from the restart to the backfill's final status (and the restart's own start-up).

Prints the figures and appends one JSON document to bench-results/crash.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import time
from pathlib import Path
from typing import Any

from atlas_dagster.cli.dagster_api import FINISHED_BACKFILL_STATUSES, DagsterApi
from atlas_dagster.tenants import load_tenants
from testkit.crash_support import (
    days_of,
    kill_everything,
    log_states,
    materialized_count,
    table_folder,
    wait_for_insert,
    wait_until,
    write_window,
)
from testkit.dagster_stack import launch_like_the_ui, run_dagster_dev, write_tenants
from testkit.postgres_server import instance_at

REPO_ROOT = Path(__file__).resolve().parent.parent
ORG = "crashbench"
DOMAINS = ["casino", "transactions"]
ENV = {"ATLAS_STALE_SWEEP_SECONDS": "5"}
TIMEOUT_SECONDS = 1800


def _tenants(work: Path, exports: Path, days: list[dt.date]) -> Path:
    entry = {
        "organization_id": ORG,
        "brand_id": "main",
        "source": f"file://{exports}",
        "start_date": days[0].isoformat(),
        "end_date": days[-1].isoformat(),
        "domains": DOMAINS,
    }
    return write_tenants(work / "tenants.yaml", [entry])


def _finish(api: DagsterApi, backfill_id: str) -> str:
    deadline = time.monotonic() + TIMEOUT_SECONDS
    status = api.backfill_status(backfill_id)["status"]
    while status not in FINISHED_BACKFILL_STATUSES:
        if time.monotonic() > deadline:
            raise TimeoutError(f"backfill {backfill_id} still {status}")
        time.sleep(0.5)
        status = api.backfill_status(backfill_id)["status"]
    return status


def _launch(api: DagsterApi, days: list[dt.date]) -> str:
    keys = [f"{d.isoformat()}|{ORG}.main" for d in days]
    return launch_like_the_ui(api, keys, [f"tbt_raw_events_{d}" for d in DOMAINS])


def uncrashed(work: Path, tenants_file: Path, days: list[dt.date]) -> dict[str, Any]:
    with run_dagster_dev(work, tenants_file, ENV) as stack:
        api = DagsterApi(stack.url)
        launched = time.monotonic()
        status = _finish(api, _launch(api, days))
        return {"status": status, "launch_to_end_s": round(time.monotonic() - launched, 1)}


def crashed(work: Path, tenants_file: Path, days: list[dt.date], kill_after: int) -> dict[str, Any]:
    with run_dagster_dev(work, tenants_file, ENV) as stack:
        dsn = stack.env["ATLAS_CLICKHOUSE_DSN"]
        api = DagsterApi(stack.url)
        launched = time.monotonic()
        backfill_id = _launch(api, days)
        with instance_at(stack.home, stack.env) as instance:
            wait_until(
                lambda: materialized_count(instance, backfill_id) >= kill_after,
                TIMEOUT_SECONDS,
                stack.log_tail,
            )
        data_dir = Path(dsn[len("chdb://") :])
        wait_for_insert(
            [table_folder(data_dir, f"tbt_raw_events_{d}") for d in DOMAINS],
            TIMEOUT_SECONDS,
            stack.log_tail,
        )
        kill_everything([stack.pid])
        killed = time.monotonic()
    at_crash = log_states(dsn, ORG)
    started = time.monotonic()
    with run_dagster_dev(work, tenants_file, ENV) as stack:
        ready = time.monotonic()
        status = _finish(DagsterApi(stack.url), backfill_id)
        ended = time.monotonic()
    after = log_states(dsn, ORG)
    reloaded = [k for k, v in at_crash.items() if v["status"] == "completed" and after[k] != v]
    return {
        "status": status,
        "launch_to_kill_s": round(killed - launched, 1),
        "restart_ready_s": round(ready - started, 1),
        "restart_to_end_s": round(ended - started, 1),
        "at_crash": {
            s: sum(1 for v in at_crash.values() if v["status"] == s)
            for s in ("completed", "running")
        }
        | {"not_started": len(days) * len(DOMAINS) - len(at_crash)},
        "completed_days_reloaded": len(reloaded),
        "attempts_after": sorted({int(v["attempt"]) for v in after.values()}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--kill-after", type=int, default=5)
    parser.add_argument("--work", type=Path, default=REPO_ROOT / ".bench-work" / "crash")
    args = parser.parse_args()
    days = days_of(dt.date(2026, 9, 1), dt.date(2026, 9, 1) + dt.timedelta(days=args.days - 1))
    exports = args.work / "exports"
    results: dict[str, Any] = {"days": args.days, "domains": DOMAINS, "rows": args.rows}
    for name in ("uncrashed", "crashed"):
        work = args.work / name
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        tenants_file = _tenants(work, exports, days)
        [tenant] = load_tenants(tenants_file)
        write_window(tenant, DOMAINS, days, args.rows)
        if name == "uncrashed":
            results[name] = uncrashed(work, tenants_file, days)
        else:
            results[name] = crashed(work, tenants_file, days, args.kill_after)
        print(name, json.dumps(results[name]))
    out = REPO_ROOT / "bench-results" / "crash.json"
    out.parent.mkdir(exist_ok=True)
    with out.open("a") as handle:
        handle.write(json.dumps({"at": dt.datetime.now(dt.UTC).isoformat(), **results}) + "\n")


if __name__ == "__main__":
    main()
