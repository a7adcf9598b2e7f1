"""Progress benchmark: what counting a fleet's progress costs `status` and a raw run.

Run with `.venv/bin/python -m bench.bench_progress [--tenants 100] [--years 3] [--repeat 5]`;
for another checkout's code (a before/after table), run this file with that checkout's venv and
the checkout first on PYTHONPATH: `PYTHONPATH=OTHER OTHER/.venv/bin/python bench/bench_progress.py`
(it uses only what both have: monitoring.status.collect and progress_metadata).

In a fresh embedded ClickHouse directory it seeds backfill_log as bench_report does (N tenants
x Y years x 4 domains, INSERT ... SELECT FROM numbers() inside the engine), then times, --repeat
times each: `status`'s collect over every tenant (the re-delivery listing off, as for a fleet),
and one tenant's progress metadata as a raw run attaches it to a materialization (with the
domains' paces read once beforehand where the code takes them, as a run shares them between
its tenants). Prints the medians and minimums.
"""

from __future__ import annotations

import argparse
import datetime as dt
import inspect
import statistics
import tempfile
import time
from collections.abc import Callable

from atlas_dagster.monitoring import pace
from atlas_dagster.monitoring.progress_metadata import progress_metadata
from atlas_dagster.monitoring.status import collect
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.scope import Scope
from bench.bench_report import DOMAINS, fleet, seed


def timed(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    seconds = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds), min(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--years", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    today = dt.datetime.now(dt.UTC).date()
    days = 365 * args.years
    start = today - dt.timedelta(days=days)
    tenants = fleet(args.tenants, start, today - dt.timedelta(days=1))
    with tempfile.TemporaryDirectory() as folder:
        clickhouse = ClickHouseResource(dsn=f"chdb://{folder}/clickhouse")
        seeded = seed(clickhouse, args.tenants, start, days)
        print(f"{args.tenants} tenants x {days} days: {seeded['backfill_log_rows']:,} log rows")
        one = tenants[len(tenants) // 2]
        with clickhouse.session() as client:
            extra = {}
            if "paces" in inspect.signature(progress_metadata).parameters:
                extra["paces"] = pace.read_paces(client, DOMAINS)

            def status() -> object:
                return collect(client, tenants, Scope(None, None, None), None, changes=False)

            def metadata() -> object:
                return progress_metadata(client, one, limit=3, **extra)

            for name, call in (("status collect, all tenants", status),
                               ("progress metadata, one tenant", metadata)):  # fmt: skip
                median, least = timed(call, args.repeat)
                print(f"{name}: median {median * 1000:.0f} ms, min {least * 1000:.0f} ms")


if __name__ == "__main__":
    main()
