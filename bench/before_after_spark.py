"""Issue 29's table: the same events written by real pyspark two ways, loaded by two checkouts.

Run from the repository root with main's venv (pyspark is a test dependency):
`.venv/bin/python -m bench.before_after_spark WORKDIR OLD_CHECKOUT [NEW_CHECKOUT]`. Two tenants,
5 days × 4 domains each: one written with Spark's defaults (`partitionBy` on the tenant columns,
INT96, DECIMAL(38,4)), one warehouse-style (TIMESTAMP_MICROS, integer ids, double money). Each
checkout's own `atlas-dagster load` (its `.venv`) loads a copy on a fresh engine and instance;
the line per run gives the exit status, wall seconds, completed and failed tenant-days from its
`status --json`, and the first failure's message.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import subprocess
import time
from pathlib import Path

from atlas_dagster.cli.demo_data import GENERATORS
from atlas_dagster.tenants import load_tenants
from testkit.spark_exports import spark_session, write_spark_defaults, write_warehouse_style

DAYS = [dt.date(2026, 9, 1) + dt.timedelta(days=i) for i in range(5)]
DOMAINS = ["user", "casino", "transactions", "sportsbook"]
FORMS = {"defaults": "spk", "warehouse": "whs"}  # how Spark writes → the tenant's organization


def _tenants_yaml(org: str, source: Path) -> str:
    lines = [
        "tenants:",
        f"  - organization_id: {org}",
        "    brand_id: main",
        f"    source: file://{source}",
        f"    start_date: {DAYS[0]}",
        f"    end_date: {DAYS[-1]}",
        f"    domains: [{', '.join(DOMAINS)}]",
    ]
    return "\n".join(lines) + "\n"


def write_exports(work: Path) -> None:
    with spark_session(work / "spark") as spark:
        for form, org in FORMS.items():
            (work / form).mkdir()
            source = work / form / "exports"
            (work / form / "tenants.yaml").write_text(_tenants_yaml(org, source))
            [tenant] = load_tenants(work / form / "tenants.yaml")
            for domain in DOMAINS:
                rows = [
                    row
                    for day in DAYS
                    for row in GENERATORS[domain][0](
                        random.Random(f"{form}{domain}{day}"), tenant, day, 20
                    )
                ]
                if form == "defaults":
                    write_spark_defaults(spark, source, domain, rows)
                else:
                    write_warehouse_style(spark, tenant, domain, rows)


def load_with(checkout: Path, work: Path, label: str, form: str) -> str:
    site = work / f"{label}-{form}"
    shutil.copytree(work / form, site)
    tenants = site / "tenants.yaml"
    tenants.write_text(tenants.read_text().replace(str(work / form), str(site)))
    home = site / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((checkout / "dagster.yaml").read_text())
    prefixes = ("ATLAS_", "DAGSTER_", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env |= {
        "DAGSTER_HOME": str(home),
        "ATLAS_TENANTS_FILE": str(tenants),
        "ATLAS_CLICKHOUSE_DSN": f"chdb://{site}/ch",
        "ATLAS_HOME": str(site),
    }
    cli, org = str(checkout / ".venv/bin/atlas-dagster"), FORMS[form]
    started = time.monotonic()
    load = subprocess.run(
        [cli, "load", "--org", org, "--brand", "main"], env=env, capture_output=True, check=False
    )
    seconds = time.monotonic() - started
    status = subprocess.run(
        [cli, "status", "--org", org, "--json"], env=env, capture_output=True, text=True
    )
    report = json.loads(status.stdout[status.stdout.index("{") :])
    done = sum(p["days_done"] for p in report["progress"])
    failed = sum(p["days_failed"] for p in report["progress"])
    first = report["failures"][0]["error_message"].split(".parquet")[-1] if failed else ""
    return (
        f"{label:6} {form:9} load exit {load.returncode}, {seconds:.1f} s; "
        f"completed {done}/{len(DAYS) * len(DOMAINS)}, failed {failed}{first[:150]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("old", type=Path, help="the checkout before (with its .venv)")
    parser.add_argument("new", type=Path, nargs="?", default=Path.cwd())
    args = parser.parse_args()
    args.work.mkdir(parents=True)
    write_exports(args.work)
    for label, checkout in (("before", args.old), ("after", args.new)):
        for form in FORMS:
            print(load_with(checkout.resolve(), args.work, label, form), flush=True)


if __name__ == "__main__":
    main()
