"""What one retry of a tenant-day costs: its failed try, its wait, its new try.

Run with `.venv/bin/python -m bench.bench_retry [--rows N] [--repeat R]`. On a fresh embedded
engine, one casino day of --rows rows (local files), then the same day on the real S3 server
(SeaweedFS, `weed mini` on loopback) through the fault-injecting proxy of the tests:

* ok: a try that loads the day (prepare_day: listing, footers, schema; insert_day: clear,
  INSERT, count, log), the day already loaded once (so it is cleared first, as a retry is);
* engine fail: a try refused by the engine (TOO_MANY_PARTS: parts_to_throw_insert reached), to
  the 'failed' row: the INSERT's refusal, the row diagnosis that rules out a contract break,
  the clear and the log;
* s3 fail: a try failing at its first footer read (the proxy resets that GET mid-body): listing
  and the failed read, to the 'failed' row;
* the wait before the next try, from the retry settings (equal jitter: half to all of the step).

Medians of --repeat tries each; a retry costs fail + wait + ok where a calm day costs ok.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import random
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from atlas_dagster.cli.demo_data import GENERATORS, arrow_table, write_day
from atlas_dagster.domains import get_domain
from atlas_dagster.exports import layout
from atlas_dagster.loading.day_load import insert_day, prepare_day
from atlas_dagster.loading.faults import classify
from atlas_dagster.loading.retry import RetryPolicy
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.settings import LoadSettings
from atlas_dagster.tenants import S3Settings, Tenant
from testkit.load_support import load_day
from testkit.s3_proxy import FaultPlan, s3_proxy
from testkit.s3_server import run_s3_server

DAY = dt.date(2026, 10, 5)
CASINO = get_domain("casino")


CAUSES: set[str] = set()  # what the failed tries failed of, printed to show they are real


def _timed(call) -> float:
    started = time.perf_counter()
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - a failed try is what is timed
        CAUSES.add(classify(exc).cause)
    return time.perf_counter() - started


def _rows(tenant: Tenant, users: int) -> list[dict]:
    generate, _ = GENERATORS["casino"]
    return generate(random.Random(7), tenant, DAY, users)


def local(work: Path, users: int, repeat: int) -> dict[str, float]:
    tenant = Tenant("bench", "main", f"file://{work / 'exports'}", DAY, DAY, ("casino",))
    rows = _rows(tenant, users)
    write_day(tenant, "casino", DAY, rows)
    clickhouse = ClickHouseResource(dsn=f"chdb://{work / 'clickhouse'}")
    with clickhouse.kept_open():
        load_day(clickhouse, tenant, CASINO, DAY, "warm")
        ok = [
            _timed(lambda: load_day(clickhouse, tenant, CASINO, DAY, "ok")) for _ in range(repeat)
        ]
        with clickhouse.session() as client:
            ensure_schema(client)
            parts = int(
                client.command(
                    "SELECT count() FROM system.parts WHERE active AND database = 'atlas' "
                    "AND table = 'tbt_raw_events_casino'"
                )
            )
            client.command(
                "ALTER TABLE atlas.tbt_raw_events_casino MODIFY SETTING "
                f"parts_to_throw_insert = {max(1, parts)}"
            )
        fail = [
            _timed(lambda: load_day(clickhouse, tenant, CASINO, DAY, "fail")) for _ in range(repeat)
        ]
    return {"rows": len(rows), "ok": statistics.median(ok), "engine_fail": statistics.median(fail)}


def s3(users: int, repeat: int) -> dict[str, float]:
    with run_s3_server() as server, tempfile.TemporaryDirectory() as work:
        bucket = "bench-retry"
        server.client().create_bucket(Bucket=bucket)
        plan = FaultPlan()
        with s3_proxy(server.endpoint_url, plan) as proxy:
            import os

            os.environ["BENCH_S3_KEY"], os.environ["BENCH_S3_SECRET"] = (
                server.access_key_id,
                server.secret_access_key,
            )
            settings = S3Settings(
                proxy.endpoint_url, "us-east-1", "BENCH_S3_KEY", "BENCH_S3_SECRET"
            )
            tenant = Tenant("bench", "main", f"s3://{bucket}/x", DAY, DAY, ("casino",), settings)
            table = arrow_table("casino", _rows(tenant, users))
            _, prefix = layout.split_s3_uri(layout.day_folder(tenant, "casino", DAY))
            body = io.BytesIO()
            pq.write_table(table, body)
            server.client().put_object(
                Bucket=bucket, Key=f"{prefix}/part-00000.parquet", Body=body.getvalue()
            )
            clickhouse = ClickHouseResource(dsn=f"chdb://{Path(work) / 'clickhouse'}")
            with clickhouse.kept_open():
                load_day(clickhouse, tenant, CASINO, DAY, "warm")

                def one_ok() -> None:
                    prepared = prepare_day(clickhouse, tenant, CASINO, DAY, "ok")
                    insert_day(clickhouse, prepared, "ok")

                ok = [_timed(one_ok) for _ in range(repeat)]
                fail = []
                for _ in range(repeat):
                    # The listing is GET 1, the first footer read GET 2: cut mid-body.
                    plan.gets, plan.reset_every, plan.cut_once = 0, 2, False
                    fail.append(_timed(lambda: prepare_day(clickhouse, tenant, CASINO, DAY, "f")))
                    plan.calm()
    return {"s3_ok": statistics.median(ok), "s3_fail": statistics.median(fail)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2000, help="users of the day (~4 rows each)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        figures = local(Path(work), args.rows, args.repeat)
    figures |= s3(args.rows, args.repeat)
    policy = RetryPolicy.from_settings(LoadSettings.from_env())
    print(f"one casino day of {figures['rows']} rows, medians of {args.repeat} tries each:")
    print(f"  ok try (local files, day cleared first)  {figures['ok'] * 1000:8.1f} ms")
    print(f"  failed try, engine TOO_MANY_PARTS         {figures['engine_fail'] * 1000:8.1f} ms")
    print(f"  ok try through S3 (SeaweedFS, proxy)      {figures['s3_ok'] * 1000:8.1f} ms")
    print(f"  failed try at an S3 footer read (reset)   {figures['s3_fail'] * 1000:8.1f} ms")
    steps = ", ".join(
        f"{step / 2:g}-{step:g}s"
        for step in (
            min(policy.max_seconds, policy.base_seconds * 2 ** (a - 1))
            for a in range(1, policy.attempts)
        )
    )
    print(f"  waits before tries 2..{policy.attempts} (settings): {steps}")
    print(f"  the failed tries' causes: {sorted(CAUSES)}")


if __name__ == "__main__":
    main()
