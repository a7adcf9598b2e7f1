"""A backfill launched through GraphQL, as the UI does, on a real Dagster webserver and daemon.

Asserts from the run records and each day's materialization: newest day first in every lane, one
INSERT at a time during the ramp-up, never more than the pool's limit after, each partition once.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance
from dagster._core.storage.dagster_run import RunsFilter

from atlas_dagster.cli.backfill import wait_for
from atlas_dagster.cli.dagster_api import FINISHED_BACKFILL_STATUSES, DagsterApi, DagsterApiError
from atlas_dagster.cli.dagster_dev import DagsterStack
from atlas_dagster.cli.demo_data import GENERATORS, arrow_table, write_day
from atlas_dagster.core.tags import BACKFILL_ID_TAG, HELD_TAG, PRIORITY_TAG, TIME_LEFT_TAG
from atlas_dagster.exports.layout import day_folder
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import load_tenants
from testkit.dagster_stack import launch_like_the_ui, run_dagster_dev, write_tenants
from testkit.insert_timeline import insert_intervals, max_overlap

pytestmark = pytest.mark.e2e

FIRST, LAST = dt.date(2026, 11, 1), dt.date(2026, 11, 10)
DOMAINS = ("casino", "user")
RAMP_DAYS = 3
BACKFILL_TIMEOUT_SECONDS = 240


RECON_FIRST, RECON_LAST = dt.date(2026, 11, 1), dt.date(2026, 11, 6)
BROKEN_DAY, MISSING_DAY, TAMPERED_DAY = (
    dt.date(2026, 11, 3),
    dt.date(2026, 11, 5),
    dt.date(2026, 11, 2),
)
# 173 days: with the per-day cost cut (issue 10) 50 days of 300 rows loaded in ~5 s, before the
# CLI's cancel landed; the cancel must land mid-run.
CANCEL_FIRST, CANCEL_LAST = dt.date(2026, 5, 1), dt.date(2026, 10, 20)


def _tenant_entry(org: str, work: Path, first: dt.date, last: dt.date, domains) -> dict:
    return {
        "organization_id": org,
        "brand_id": "main",
        "source": f"file://{work / 'exports'}",
        "start_date": first.isoformat(),
        "end_date": last.isoformat(),
        "domains": list(domains),
    }


def _write_days(tenant, domains, first: dt.date, last: dt.date, skip=()) -> None:
    day = first
    while day <= last:
        for domain in domains:
            if day not in skip:
                generate, _ = GENERATORS[domain]
                rows = generate(random.Random(f"{domain}{day}"), tenant, day, 300)
                write_day(tenant, domain, day, rows)
        day += dt.timedelta(days=1)


def _write_broken_day(tenant, day: dt.date) -> None:
    """amount exported as text: refused by validation before any INSERT."""
    generate, _ = GENERATORS["casino"]
    table = arrow_table("casino", generate(random.Random("broken"), tenant, day, 50))
    index = table.schema.get_field_index("amount")
    table = table.set_column(index, "amount", table.column(index).cast(pa.string()))
    folder = Path(day_folder(tenant, "casino", day)[len("file://") :])
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.parquet"):
        stale.unlink()
    pq.write_table(table, folder / "part-00000.parquet")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("e2e")
    tenants_file = write_tenants(
        work / "tenants.yaml",
        [
            _tenant_entry("e2e", work, FIRST, LAST, DOMAINS),
            _tenant_entry("recon", work, RECON_FIRST, RECON_LAST, ["casino"]),
            _tenant_entry("cancel", work, CANCEL_FIRST, CANCEL_LAST, ["casino"]),
        ],
    )
    tenants = {t.organization_id: t for t in load_tenants(tenants_file)}
    _write_days(tenants["e2e"], DOMAINS, FIRST, LAST)
    _write_days(tenants["recon"], ["casino"], RECON_FIRST, RECON_LAST, skip=(MISSING_DAY,))
    _write_broken_day(tenants["recon"], BROKEN_DAY)
    _write_days(tenants["cancel"], ["casino"], CANCEL_FIRST, CANCEL_LAST)
    with run_dagster_dev(work, tenants_file, {"ATLAS_RAMP_UP_DAYS": str(RAMP_DAYS)}) as running:
        yield running


def _keys(days: list[dt.date]) -> list[str]:
    return [f"{d.isoformat()}|e2e.main" for d in days]


def _wait(api: DagsterApi, stack: DagsterStack, backfill_id: str) -> dict:
    deadline = time.monotonic() + BACKFILL_TIMEOUT_SECONDS
    status = api.backfill_status(backfill_id)
    while status["status"] not in FINISHED_BACKFILL_STATUSES:
        assert time.monotonic() < deadline, f"backfill still {status}:\n{stack.log_tail()}"
        time.sleep(1)
        status = api.backfill_status(backfill_id)
    return status


def _backfill_runs(instance: DagsterInstance, backfill_id: str):
    return instance.get_run_records(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))


def test_graphql_backfill_runs_newest_first_with_ramp_up_and_cap(stack: DagsterStack) -> None:
    api = DagsterApi(stack.url)
    days = [FIRST + dt.timedelta(days=i) for i in range((LAST - FIRST).days + 1)]
    assets = [f"tbt_raw_events_{d}" for d in DOMAINS]
    backfill_id = launch_like_the_ui(api, _keys(days), assets)
    assert _wait(api, stack, backfill_id)["status"] in ("COMPLETED", "COMPLETED_SUCCESS")

    with DagsterInstance.from_config(str(stack.home)) as instance:
        records = _backfill_runs(instance, backfill_id)
        assert records and all(r.dagster_run.status.value == "SUCCESS" for r in records)
        assert all(r.dagster_run.tags.get(HELD_TAG) == "false" for r in records)
        assert all(PRIORITY_TAG in r.dagster_run.tags for r in records)
        # Each run's time left (pace.time_left), as `backfill --wait` shows it, ends at 0.
        left = [r.dagster_run.tags.get(TIME_LEFT_TAG, "") for r in records]
        ended = r"0 of \d+ tenant-day\(s\) left, about 0\.0 min at the measured pace"
        assert all(re.fullmatch(ended, t) for t in left), left
        intervals = insert_intervals(instance, [r.dagster_run.run_id for r in records])
        pool = instance.event_log_storage.get_concurrency_info("atlas_insert")

    # Each partition of each asset materialized exactly once.
    counts = Counter((i.asset_key, i.partition_key) for i in intervals)
    assert set(counts) == {(a, k) for a in assets for k in _keys(days)}
    assert set(counts.values()) == {1}

    # Newest day first: in every lane, and the very first INSERT is the newest day.
    assert intervals[0].partition_key.startswith(LAST.isoformat())
    for asset in assets:
        lane = [i.partition_key for i in intervals if i.asset_key == asset]
        assert lane == sorted(lane, reverse=True), lane

    # Ramp-up: the 3 newest days (both domains) one INSERT at a time, all done before the rest.
    ramp_dates = {d.isoformat() for d in days[-RAMP_DAYS:]}
    ramp = [i for i in intervals if i.partition_key[:10] in ramp_dates]
    after = [i for i in intervals if i.partition_key[:10] not in ramp_dates]
    assert len(ramp) == RAMP_DAYS * len(DOMAINS)
    assert max_overlap(ramp) == 1
    assert min(i.started_at for i in after) >= max(i.finished_at for i in ramp)
    # Then parallel, within the pool's limit (3 by default, never above the cap of 4).
    assert pool.limit == 3 and pool.claimed_slots == []
    assert 2 <= max_overlap(after) <= pool.limit


def test_scattered_days_run_as_several_runs_still_newest_first(stack: DagsterStack) -> None:
    """Re-running scattered days gives one run per range; they are queued together, dequeued
    by priority and serialized per tenant, so the lane still starts newest first."""
    api = DagsterApi(stack.url)
    days = [
        FIRST + dt.timedelta(days=1),
        FIRST + dt.timedelta(days=4),
        FIRST + dt.timedelta(days=7),
    ]
    backfill_id = launch_like_the_ui(api, _keys(days), ["tbt_raw_events_casino"])
    assert _wait(api, stack, backfill_id)["status"] in ("COMPLETED", "COMPLETED_SUCCESS")

    with DagsterInstance.from_config(str(stack.home)) as instance:
        records = sorted(_backfill_runs(instance, backfill_id), key=lambda r: r.start_time)
        intervals = insert_intervals(instance, [r.dagster_run.run_id for r in records])

    assert len(records) == 3
    started_days = [r.dagster_run.tags["dagster/asset_partition_range_start"][:10] for r in records]
    assert started_days == sorted(started_days, reverse=True)
    # Serialized: each run starts after the previous one ended.
    for earlier, later in zip(records, records[1:], strict=False):
        assert later.start_time >= earlier.end_time
    assert [i.partition_key[:10] for i in intervals] == sorted(
        (d.isoformat() for d in days), reverse=True
    )


def _cli(stack: DagsterStack, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "atlas-dagster"), *args],
        env=stack.env,
        cwd=stack.env["ATLAS_HOME"],
        capture_output=True,
        text=True,
        timeout=BACKFILL_TIMEOUT_SECONDS + 60,
    )


def _failing_days(verify_output: str) -> dict[str, set[str]]:
    """{day: {check names}} of the FAIL lines `atlas-dagster verify` prints."""
    failing: dict[str, set[str]] = {}
    for line in verify_output.splitlines():
        parts = line.split()
        if parts and parts[0] == "FAIL":
            failing.setdefault(parts[1], set()).add(parts[3])
    return failing


def _recon_status(stack: DagsterStack) -> dict:
    completed = _cli(stack, "status", "--org", "recon", "--json")
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_reconciliation_flags_failed_missing_and_tampered_days_until_rerun(
    stack: DagsterStack,
) -> None:
    api = DagsterApi(stack.url)
    loaded = [d for d in _recon_days() if d != MISSING_DAY]
    keys = [f"{d}|recon.main" for d in loaded]
    backfill_id = launch_like_the_ui(api, keys, ["tbt_raw_events_casino"])
    assert _wait(api, stack, backfill_id)["status"] in ("COMPLETED_FAILED", "FAILED")
    clickhouse = ClickHouseResource(dsn=stack.env["ATLAS_CLICKHOUSE_DSN"])
    with clickhouse.session() as client:  # rows deleted behind the log's back
        client.command(
            "DELETE FROM atlas.tbt_raw_events_casino WHERE organization_id = 'recon' "
            "AND event_date = {day:Date} AND event_id IN (SELECT event_id FROM "
            "atlas.tbt_raw_events_casino WHERE organization_id = 'recon' AND event_date = "
            "{day:Date} ORDER BY event_id LIMIT 7)",
            parameters={"day": TAMPERED_DAY},
        )

    verify = _cli(stack, "verify", "--org", "recon", "--brand", "main", "--layer", "raw")
    assert verify.returncode == 1, verify.stdout + verify.stderr
    failing = _failing_days(verify.stdout)
    assert set(failing) == {str(BROKEN_DAY), str(MISSING_DAY), str(TAMPERED_DAY)}, verify.stdout
    assert failing[str(TAMPERED_DAY)] == {"rows_reconcile"}
    assert failing[str(BROKEN_DAY)] == {"log_completed", "rows_reconcile", "schema_conformance"}
    assert "log_completed" in failing[str(MISSING_DAY)]

    status = _recon_status(stack)
    assert [f["partition_date"] for f in status["failures"]] == [str(BROKEN_DAY)]
    assert "amount" in status["failures"][0]["error_message"]
    assert sorted(g["partition_date"] for g in status["gaps"]) == sorted(
        [str(BROKEN_DAY), str(MISSING_DAY)]
    )
    assert status["stale"] == []

    [tenant] = [
        t
        for t in load_tenants(Path(stack.env["ATLAS_TENANTS_FILE"]))
        if t.organization_id == "recon"
    ]
    _write_days(tenant, ["casino"], BROKEN_DAY, BROKEN_DAY)  # the client re-delivers
    _write_days(tenant, ["casino"], MISSING_DAY, MISSING_DAY)
    plan = _cli(
        stack, "backfill", "--org", "recon", "--brand", "main", "--only-failed", "--dry-run"
    )
    assert plan.returncode == 0, plan.stderr
    assert str(BROKEN_DAY) in plan.stdout and str(TAMPERED_DAY) in plan.stdout
    assert str(MISSING_DAY) not in plan.stdout.split("total:")[0].split("newest first")[1]
    # One command recovers both: without --only-*, backfill takes the incomplete days (missing,
    # failed, or completed with other rows than logged) and nothing that completed.
    plan = _cli(stack, "backfill", "--org", "recon", "--brand", "main", "--dry-run")
    planned = plan.stdout.split("total:")[0].split("newest first")[1]
    assert {str(BROKEN_DAY), str(MISSING_DAY), str(TAMPERED_DAY)} == {
        d for d in map(str, _recon_days()) if d in planned
    }, plan.stdout
    rerun = _cli(
        stack, "backfill", "--org", "recon", "--brand", "main", "--wait", "--url", stack.url
    )
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr

    verify = _cli(stack, "verify", "--org", "recon", "--brand", "main", "--layer", "raw")
    assert verify.returncode == 0, verify.stdout
    assert f"{3 * len(_recon_days())} passed, 0 failed" in verify.stdout
    status = _recon_status(stack)
    assert status["failures"] == [] and status["gaps"] == []


def _recon_days() -> list[dt.date]:
    return [RECON_FIRST + dt.timedelta(days=i) for i in range((RECON_LAST - RECON_FIRST).days + 1)]


def _log_rows(stack: DagsterStack, org: str) -> list[dict]:
    clickhouse = ClickHouseResource(dsn=stack.env["ATLAS_CLICKHOUSE_DSN"])
    with clickhouse.session() as client:
        result = client.query(
            "SELECT partition_date, status, error_message FROM atlas.backfill_log FINAL "
            "WHERE organization_id = {org:String} ORDER BY partition_date",
            parameters={"org": org},
        )
    return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]


def test_cancel_stops_queued_days_and_leaves_nothing_running(stack: DagsterStack) -> None:
    launched = _cli(stack, "backfill", "--org", "cancel", "--brand", "main", "--url", stack.url)
    assert launched.returncode == 0, launched.stderr
    backfill_id = re.search(r"launched backfill (\w+)", launched.stdout).group(1)
    deadline = time.monotonic() + BACKFILL_TIMEOUT_SECONDS
    with DagsterInstance.from_config(str(stack.home)) as instance:
        while True:  # let a few days load, then cancel mid-run
            records = _backfill_runs(instance, backfill_id)
            loaded = insert_intervals(instance, [r.dagster_run.run_id for r in records])
            if len(loaded) >= 2:
                break
            assert time.monotonic() < deadline, stack.log_tail()
            time.sleep(0.2)
        canceled = _cli(stack, "cancel", backfill_id, "--url", stack.url)
        assert canceled.returncode == 0, canceled.stdout + canceled.stderr
        [record] = records
        while not instance.get_run_by_id(record.dagster_run.run_id).is_finished:
            assert time.monotonic() < deadline, stack.log_tail()
            time.sleep(0.5)
        run = instance.get_run_by_id(record.dagster_run.run_id)
    assert run.status.value == "CANCELED"
    rows = _log_rows(stack, "cancel")
    all_days = (CANCEL_LAST - CANCEL_FIRST).days + 1
    assert 2 <= len(rows) < all_days, "the cancel should land mid-run: days were left unstarted"
    assert [r for r in rows if r["status"] == "running"] == []
    for row in rows:
        assert row["status"] == "completed" or "canceled" in row["error_message"], row
    # What did load is the newest days, in one unbroken stretch back from the last day.
    logged = sorted((r["partition_date"] for r in rows), reverse=True)
    assert logged == [CANCEL_LAST - dt.timedelta(days=i) for i in range(len(logged))]


def test_backfill_wait_gives_up_at_its_bound_and_the_backfill_goes_on(stack: DagsterStack) -> None:
    """`--wait` reports the backfill's progress and, at its bound, exits 2 saying where to follow
    it; the backfill is left alone and finishes. A status request the webserver refuses (an
    unknown backfill) fails at once instead of being waited for."""
    day = CANCEL_FIRST.isoformat()  # the cancel test stops before the oldest day
    # A backfill cannot finish in 2 s: the daemon marks it done on a later pass (every 30 s).
    waited = _cli(
        stack,
        *("backfill", "--org", "cancel", "--brand", "main", "--start", day, "--end", day),
        *("--wait", "--wait-seconds", "2", "--url", stack.url),
    )
    assert waited.returncode == 2, waited.stdout + waited.stderr
    backfill_id = re.search(r"launched backfill (\w+)", waited.stdout).group(1)
    assert f"atlas-dagster: waiting for backfill {backfill_id} to finish" in waited.stderr
    assert (
        f"atlas-dagster: gave up waiting for backfill {backfill_id} to finish (it goes on "
        f"without this wait: {stack.url}/runs/b/{backfill_id})"
    ) in waited.stderr
    api = DagsterApi(stack.url)
    assert wait_for(api, backfill_id, BACKFILL_TIMEOUT_SECONDS) == 0, stack.log_tail()
    statuses = {row["partition_date"]: row["status"] for row in _log_rows(stack, "cancel")}
    assert statuses[CANCEL_FIRST] == "completed"
    asked: list[str] = []
    status = api.backfill_status

    def counted_status(backfill_id: str, *args, **kwargs) -> dict:
        asked.append(backfill_id)
        return status(backfill_id, *args, **kwargs)

    api.backfill_status = counted_status  # type: ignore[method-assign]
    with pytest.raises(DagsterApiError, match="backfill nosuchbackfill"):
        wait_for(api, "nosuchbackfill", BACKFILL_TIMEOUT_SECONDS)
    assert asked == ["nosuchbackfill"]  # refused at the first request: not asked again
