"""Issue 31's table: a corrected re-delivery of two loaded days, and what an operator tries.

Run from the repository root: `.venv/bin/python -m bench.before_after_redelivery WORKDIR
[CHECKOUT]` (default: this one), once per checkout to compare (each with its own `.venv`). Five
days × casino + transactions loaded with `atlas-dagster load`; then day 3's casino files are
written again with corrected amounts (same rows, same names) and day 4's transactions get two
more deposits in a new file. Printed: `status --json`'s `changed`, `check-export`, `verify
--layer raw`'s failing lines, `load --only-changed` twice, and `verify` again, each with its exit
status and wall seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq

from atlas_dagster.cli.demo_data import GENERATORS, arrow_table, write_day
from atlas_dagster.exports.layout import day_folder
from atlas_dagster.tenants import Tenant, load_tenants

DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(5)]
DOMAINS = ("casino", "transactions")


def _site(work: Path, checkout: Path) -> tuple[Tenant, dict[str, str]]:
    lines = [
        "tenants:",
        "  - organization_id: redel",
        "    brand_id: main",
        f"    source: file://{work}/exports",
        f"    start_date: {DAYS[0]}",
        f"    end_date: {DAYS[-1]}",
        f"    domains: [{', '.join(DOMAINS)}]",
    ]
    (work / "tenants.yaml").write_text("\n".join(lines) + "\n")
    home = work / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((checkout / "dagster.yaml").read_text())
    prefixes = ("ATLAS_", "DAGSTER_", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env |= {
        "DAGSTER_HOME": str(home),
        "ATLAS_TENANTS_FILE": str(work / "tenants.yaml"),
        "ATLAS_CLICKHOUSE_DSN": f"chdb://{work}/ch",
        "ATLAS_HOME": str(work),
    }
    [tenant] = load_tenants(work / "tenants.yaml")
    return tenant, env


def _redeliver(tenant: Tenant) -> None:
    folder = Path(day_folder(tenant, "casino", DAYS[2])[len("file://") :])
    for path in sorted(folder.glob("*.parquet")):
        rows = pq.read_table(path).to_pylist()
        corrected = [r | {"amount": Decimal(r["amount"]) + Decimal("1.25")} for r in rows]
        pq.write_table(arrow_table("casino", corrected), path)
    extra = GENERATORS["transactions"][0](random.Random("late"), tenant, DAYS[3], 2)
    for i, row in enumerate(extra):
        row |= {"event_id": f"late-{i}", "transaction_id": f"late-{i}", "event_type": "deposit"}
    folder = Path(day_folder(tenant, "transactions", DAYS[3])[len("file://") :])
    pq.write_table(arrow_table("transactions", extra), folder / "part-late.parquet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("checkout", type=Path, nargs="?", default=Path.cwd())
    args = parser.parse_args()
    args.work.mkdir(parents=True)
    checkout = args.checkout.resolve()
    tenant, env = _site(args.work, checkout)
    for domain in DOMAINS:
        for day in DAYS:
            rows = GENERATORS[domain][0](random.Random(f"{domain}{day}"), tenant, day, 30)
            write_day(tenant, domain, day, rows)
    cli = str(checkout / ".venv/bin/atlas-dagster")

    def run(*command: str) -> tuple[int, str, float]:
        """Exit status, standard output (stderr after it when it failed), wall seconds."""
        started = time.monotonic()
        done = subprocess.run(
            [cli, command[0], "--org", "redel", "--brand", "main", *command[1:]],
            env=env,
            capture_output=True,
            text=True,
        )
        out = done.stdout + (done.stderr if done.returncode else "")
        return done.returncode, out or "(no output)", time.monotonic() - started

    print(f"first load: exit {run('load')[0]}")
    _redeliver(tenant)
    code, out, seconds = run("status", "--json")
    changed = json.loads(out).get("changed", "absent") if code == 0 else out[-300:]
    print(f"status --json: exit {code}, {seconds:.1f} s, changed: {changed}")
    code, out, seconds = run("check-export")
    print(f"check-export: exit {code}, {seconds:.1f} s")
    for label in ("verify --layer raw", "load --only-changed", "load --only-changed, again"):
        if label.startswith("load"):
            code, out, seconds = run("load", "--only-changed")
            print(f"{label}: exit {code}, {seconds:.1f} s; {out.strip().splitlines()[-1][:160]}")
            continue
        code, out, seconds = run("verify", "--layer", "raw")
        failing = [line[:160] for line in out.splitlines() if line.startswith("FAIL")]
        print(f"{label}: exit {code}, {seconds:.1f} s, {len(failing)} failing")
        for line in failing:
            print(f"    {line}")
    code, out, seconds = run("verify", "--layer", "raw")
    print(f"verify --layer raw after: exit {code}, {seconds:.1f} s")


if __name__ == "__main__":
    main()
