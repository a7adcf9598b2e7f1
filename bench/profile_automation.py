"""Profiles the gold automation in-process: one evaluation idle, then one after a whole year of a
tenant's raw (1,460 materializations) landed at once, the worst case for one tick.

`.venv/bin/python -m bench.profile_automation --tenants 100` prints each evaluation's seconds
and the cProfile of the landing one (top --top entries by cumulative time). It goes through
Dagster's `evaluate_automation_conditions` on a temporary instance, the same evaluator the
code server runs for the sensor; bench/bench_fleet.py measures the real daemon.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import os
import pstats
import tempfile
import time
from pathlib import Path

from bench.bench_fleet import END, write_tenants


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="atlas-profile-automation-"))
    keys = write_tenants(root / "tenants.yaml", args.tenants)
    os.environ["ATLAS_TENANTS_FILE"] = str(root / "tenants.yaml")
    os.environ["ATLAS_CLICKHOUSE_DSN"] = f"chdb://{root / 'clickhouse'}"

    from dagster import AssetMaterialization, evaluate_automation_conditions, instance_for_test

    from atlas_dagster.definitions import build_definitions
    from atlas_dagster.domains import DOMAINS
    from atlas_dagster.partitions import TenantDay

    defs = build_definitions()
    with instance_for_test() as instance:
        cursor = None
        for label in ("first evaluation", "idle"):
            started = time.perf_counter()
            cursor = evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
            print(f"{label}: {time.perf_counter() - started:.2f} s")
            cursor = cursor.cursor
        for n in range(365):
            key = TenantDay(END - dt.timedelta(days=n), keys[0]).partition_key
            for domain in DOMAINS.values():
                instance.report_runless_asset_event(
                    AssetMaterialization(domain.raw_table, partition=key)
                )
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        result = evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
        profile.disable()
        seconds = time.perf_counter() - started
        print(
            f"a year landed (1,460 raw materializations): {seconds:.2f} s, "
            f"{result.total_requested} gold tenant-days requested"
        )
        pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
