"""A backfill launched through GraphQL, as the UI does, on a real Dagster webserver and daemon.

Asserts from the run records and each day's materialization: newest day first in every lane, one
INSERT at a time during the ramp-up, never more than the pool's limit after, each partition once.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections import Counter

import pytest
from dagster import DagsterInstance
from dagster._core.storage.dagster_run import RunsFilter
from dagster._core.storage.tags import BACKFILL_ID_TAG, PRIORITY_TAG

from atlas_dagster.cli.dagster_api import FINISHED_BACKFILL_STATUSES, DagsterApi
from atlas_dagster.demo_data import GENERATORS, write_day
from atlas_dagster.orchestration.insert_timeline import insert_intervals, max_overlap
from atlas_dagster.orchestration.run_coordinator import HELD_TAG
from atlas_dagster.tenants import load_tenants
from atlas_dagster_tests.dagster_stack import DagsterStack, run_dagster_dev, write_tenants

FIRST, LAST = dt.date(2026, 11, 1), dt.date(2026, 11, 10)
DOMAINS = ("casino", "user")
RAMP_DAYS = 3
BACKFILL_TIMEOUT_SECONDS = 240


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("e2e")
    tenants_file = write_tenants(
        work / "tenants.yaml",
        [
            {
                "organization_id": "e2e",
                "brand_id": "main",
                "source": f"file://{work / 'exports'}",
                "start_date": FIRST.isoformat(),
                "end_date": LAST.isoformat(),
                "domains": list(DOMAINS),
            }
        ],
    )
    [tenant] = load_tenants(tenants_file)
    day = FIRST
    while day <= LAST:
        for domain in DOMAINS:
            generate, _ = GENERATORS[domain]
            write_day(
                tenant, domain, day, generate(random.Random(f"{domain}{day}"), tenant, day, 300)
            )
        day += dt.timedelta(days=1)
    with run_dagster_dev(work, tenants_file, {"ATLAS_RAMP_UP_DAYS": str(RAMP_DAYS)}) as running:
        yield running


def _keys(days: list[dt.date]) -> list[str]:
    return [f"{d.isoformat()}|e2e.main" for d in days]


def _launch_like_the_ui(api: DagsterApi, partition_names: list[str], assets: list[str]) -> str:
    """The asset page's materialize dialog sends launchPartitionBackfill with these params."""
    params = {
        "partitionNames": partition_names,
        "assetSelection": [{"path": [a]} for a in assets],
        "fromFailure": False,
        "tags": [],
    }
    result = api.call("launch_backfill", {"params": params})["launchPartitionBackfill"]
    assert result["__typename"] == "LaunchBackfillSuccess", result
    return result["backfillId"]


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
    backfill_id = _launch_like_the_ui(api, _keys(days), assets)
    assert _wait(api, stack, backfill_id)["status"] in ("COMPLETED", "COMPLETED_SUCCESS")

    with DagsterInstance.from_config(str(stack.home)) as instance:
        records = _backfill_runs(instance, backfill_id)
        assert records and all(r.dagster_run.status.value == "SUCCESS" for r in records)
        assert all(r.dagster_run.tags.get(HELD_TAG) == "false" for r in records)
        assert all(PRIORITY_TAG in r.dagster_run.tags for r in records)
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
    backfill_id = _launch_like_the_ui(api, _keys(days), ["tbt_raw_events_casino"])
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
