"""Without AtlasRunCoordinator (Dagster+ cannot install one): the stock QueuedRunCoordinator runs a
backfill's runs at once, and the pool atlas_insert still gives every INSERT slot to the newest day
waiting for one, across runs; each run still loads its own days newest first.

The pool's only slot is held while the backfill's runs start, as another backfill's INSERTs would
hold it on a busy deployment, so that every run is waiting when slots free up.
"""

from __future__ import annotations

import datetime as dt
import random
import time

import pytest
import yaml
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from dagster._core.test_utils import create_run_for_test

from atlas_dagster import dagster_internals as internals
from atlas_dagster.cli.dagster_api import FINISHED_BACKFILL_STATUSES, DagsterApi
from atlas_dagster.cli.demo_data import GENERATORS, write_day
from atlas_dagster.core.tags import HELD_TAG
from atlas_dagster.orchestration.pools import INSERT_POOL
from atlas_dagster.tenants import load_tenants
from testkit.dagster_stack import DAGSTER_YAML, run_dagster_dev, write_tenants
from testkit.insert_timeline import InsertInterval, insert_intervals, max_overlap

pytestmark = pytest.mark.e2e

FIRST = dt.date(2026, 11, 1)
# Three runs, as a backfill of scattered days makes them; submitted oldest first by Dagster.
RANGES = [(1, 2), (4, 5), (7, 8)]
WAIT_SECONDS = 240
# The slot goes to a waiting claim when the previous INSERT frees it, a few ms after its end.
FREE_SLACK_SECONDS = 0.05


def _stock_instance_yaml() -> str:
    """The project's dagster.yaml with Dagster's own queue instead of AtlasRunCoordinator."""
    config = yaml.safe_load(DAGSTER_YAML.read_text())
    del config["run_coordinator"]
    config["concurrency"]["runs"] = {"max_concurrent_runs": 4}
    return yaml.safe_dump(config)


def _day(n: int) -> dt.date:
    return FIRST + dt.timedelta(days=n - 1)


def _wait_until(predicate, what: str, stack) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{stack.log_tail()}"
        time.sleep(0.5)


def _claimed_at(interval: InsertInterval) -> float:
    return interval.started_at - interval.phases["wall_seconds"]["slot_wait"]


def test_stock_queue_still_gives_each_insert_slot_to_the_newest_waiting_day(tmp_path) -> None:
    tenants_file = write_tenants(
        tmp_path / "tenants.yaml",
        [
            {
                "organization_id": "stock",
                "brand_id": "main",
                "source": f"file://{tmp_path / 'exports'}",
                "start_date": _day(1).isoformat(),
                "end_date": _day(8).isoformat(),
                "domains": ["casino"],
            }
        ],
    )
    [tenant] = load_tenants(tenants_file)
    for first, last in RANGES:
        for n in (first, last):
            rows = GENERATORS["casino"][0](random.Random(n), tenant, _day(n), 400)
            write_day(tenant, "casino", _day(n), rows)
    env = {"ATLAS_MAX_PARALLEL_INSERTS": "1"}
    with run_dagster_dev(tmp_path, tenants_file, env, _stock_instance_yaml()) as stack:
        api = DagsterApi(stack.url)
        with DagsterInstance.from_config(str(stack.home)) as instance:
            internals.set_pool_limit(instance, INSERT_POOL, 1)
            # Another backfill's INSERT, held by a run the instance knows as STARTED: a claim of an
            # unknown run would be freed as dead by the first waiting claimant.
            busy = create_run_for_test(
                instance, job_name="other", status=DagsterRunStatus.STARTED
            ).run_id
            assert internals.claim_pool_slot(instance, INSERT_POOL, busy, "other-backfill", 0)
            ranges = [(f"{_day(a)}|{tenant.key}", f"{_day(b)}|{tenant.key}") for a, b in RANGES]
            backfill_id = api.launch_backfill({"tbt_raw_events_casino": ranges}, "stock", {})
            _wait_until(
                lambda: len(internals.pool_info(instance, INSERT_POOL).pending_run_ids) == 3,
                "the three runs to wait for an INSERT slot",
                stack,
            )
            internals.free_pool_slot(instance, busy, "other-backfill")
            _wait_until(
                lambda: api.backfill_status(backfill_id)["status"] in FINISHED_BACKFILL_STATUSES,
                "the backfill to finish",
                stack,
            )
            records = instance.get_run_records(
                RunsFilter(tags={internals.BACKFILL_ID_TAG: backfill_id})
            )
            intervals = insert_intervals(instance, [r.dagster_run.run_id for r in records])

    assert len(records) == 3 and all(r.dagster_run.status.value == "SUCCESS" for r in records)
    assert not any(HELD_TAG in r.dagster_run.tags for r in records)  # never seen our coordinator
    assert len(intervals) == 6 and max_overlap(intervals) == 1
    dates = [i.partition_key[:10] for i in intervals]
    # The slot freed by the other backfill went to the newest day of all.
    assert dates[0] == _day(8).isoformat(), dates
    # Each run (lane) loads its own days newest first.
    for record in records:
        lane = [i.partition_key for i in intervals if i.run_id == record.dagster_run.run_id]
        assert lane == sorted(lane, reverse=True), lane
    # Every slot freed went to the newest day waiting for one at that moment.
    for previous, granted in zip(intervals, intervals[1:], strict=False):
        freed_at = previous.finished_at - FREE_SLACK_SECONDS
        waiting = [
            i.partition_key[:10]
            for i in intervals
            if i.started_at > previous.started_at and _claimed_at(i) < freed_at
        ]
        assert not waiting or granted.partition_key[:10] == max(waiting), (dates, waiting)
