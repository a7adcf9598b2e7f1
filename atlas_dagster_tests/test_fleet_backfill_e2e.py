"""A fleet backfill in one action, on a real webserver and daemon, SQLite and PostgreSQL instances
(the UI's path on PostgreSQL).

`atlas-dagster backfill --all-tenants` and the UI's Materialize… over every tenant's range both
launch an asset backfill through GraphQL launchPartitionBackfill; Dagster splits it into one run
per tenant, the first of which loads the whole fleet. Asserted from each day's materialization:
INSERTs start newest day first across the fleet (an older day of one tenant never starts before
a newer day of another, except where that newer day was held by its tenant's ramp-up or its
lane), each tenant ramps up one INSERT at a time, the pool's cap holds, each partition loads
once, the backfill completes.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from dagster import DagsterEventType, RunsFilter

from atlas_dagster.cli.backfill import wait_for
from atlas_dagster.cli.dagster_api import DagsterApi
from atlas_dagster.cli.dagster_dev import DagsterStack
from atlas_dagster.cli.demo_data import GENERATORS, write_day
from atlas_dagster.core.tags import BACKFILL_ID_TAG, COVERED_BY_TAG, FLEET_LEADER_TAG
from atlas_dagster.dagster_internals import SUBSET_PLANNED_EVENTS_ENV
from atlas_dagster.tenants import load_tenants
from testkit.dagster_stack import launch_like_the_ui, write_tenants
from testkit.fleet_order import date_of, tenant_of, unexplained_inversions
from testkit.insert_timeline import InsertInterval, insert_intervals, max_overlap
from testkit.postgres_server import dagster_dev, stack_instance

pytestmark = pytest.mark.e2e  # a real dagster dev / daemon

FIRST, LAST = dt.date(2026, 10, 1), dt.date(2026, 10, 5)
TENANTS = ("fleet0", "fleet1", "fleet2", "fleet3")
DOMAINS = ("casino", "user")
RAMP_DAYS = 3
TIMEOUT_SECONDS = 300


def _days(first: dt.date, last: dt.date) -> list[dt.date]:
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


POSTGRES = pytest.param("postgres", marks=pytest.mark.postgres)


@pytest.fixture(scope="module", params=["sqlite", POSTGRES])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp(f"fleet-{request.param}")
    entries = [
        {
            "organization_id": org,
            "brand_id": "main",
            "source": f"file://{work / 'exports'}",
            "start_date": FIRST.isoformat(),
            "end_date": LAST.isoformat(),
            "domains": list(DOMAINS),
        }
        for org in TENANTS
    ]
    tenants_file = write_tenants(work / "tenants.yaml", entries)
    for tenant in load_tenants(tenants_file):
        for day in _days(FIRST, LAST):
            for domain in DOMAINS:
                generate, _ = GENERATORS[domain]
                rows = generate(random.Random(f"{tenant.key}{domain}{day}"), tenant, day, 200)
                write_day(tenant, domain, day, rows)
    extra = {"ATLAS_RAMP_UP_DAYS": str(RAMP_DAYS)}
    # PostgreSQL runs the documented production configuration, subset planned events included.
    extra[SUBSET_PLANNED_EVENTS_ENV] = "1" if request.param == "postgres" else ""
    with dagster_dev(work, tenants_file, request.param, extra) as running:
        yield running


def _cli(stack: DagsterStack, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "atlas-dagster"), *args],
        env=stack.env,
        cwd=stack.env["ATLAS_HOME"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )


def _fleet_runs(stack: DagsterStack, backfill_id: str):
    """(leader, intervals, pool): the backfill's runs, one leading, the others covered by it."""
    with stack_instance(stack) as instance:
        runs = instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
        intervals = insert_intervals(instance, [r.run_id for r in runs])
        pool = instance.event_log_storage.get_concurrency_info("atlas_insert")
        [leader] = [r for r in runs if r.tags.get(FLEET_LEADER_TAG) == "true"]
        checks = instance.get_records_for_run(
            leader.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION, limit=1000
        )
        planned = instance.get_records_for_run(
            leader.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION_PLANNED, limit=1000
        )
    assert len(runs) == len(TENANTS)  # Dagster's split: one run per tenant
    assert all(r.status.value == "SUCCESS" for r in runs)
    assert {r.tags.get(COVERED_BY_TAG) for r in runs if r is not leader} == {leader.run_id}
    assert {i.run_id for i in intervals} == {leader.run_id}
    assert len(checks.records) == 3 * len(intervals)  # the raw checks, one per tenant-day
    # The leader's own range is one tenant's days: one planned event per asset with the switch,
    # one per asset and partition without it (days x domains).
    per_asset = stack.env.get(SUBSET_PLANNED_EVENTS_ENV) == "1"
    assert len(planned.records) == len(DOMAINS) * (1 if per_asset else len(_days(FIRST, LAST)))
    return leader, intervals, pool


def test_fleet_backfill_in_one_action_runs_newest_day_first_across_tenants(
    stack: DagsterStack,
) -> None:
    launched = _cli(
        stack,
        "backfill",
        "--all-tenants",
        "--start",
        FIRST.isoformat(),
        "--end",
        LAST.isoformat(),
        "--wait",
        "--url",
        stack.url,
    )
    assert launched.returncode == 0, launched.stdout + launched.stderr + stack.log_tail()
    backfill_id = re.search(r"launched backfill (\w+)", launched.stdout).group(1)
    _, intervals, pool = _fleet_runs(stack, backfill_id)

    # Each partition of each asset materialized exactly once, every tenant in the one run.
    assets = [f"tbt_raw_events_{d}" for d in DOMAINS]
    keys = {f"{day}|{org}.main" for day in _days(FIRST, LAST) for org in TENANTS}
    counts = Counter((i.asset_key, i.partition_key) for i in intervals)
    assert set(counts) == {(a, k) for a in assets for k in keys}
    assert set(counts.values()) == {1}

    # Newest first across the fleet: every tenant's newest day starts before anyone's older
    # day, allowing only what the ramp-up and lanes imply.
    order = [(i.partition_key, i.asset_key) for i in intervals]
    assert date_of(intervals[0]) == LAST.isoformat()
    inversions = [
        (older.partition_key, older.asset_key, newer.partition_key, newer.asset_key)
        for older, newer in unexplained_inversions(intervals, RAMP_DAYS)
    ]
    assert inversions == [], order

    # Each tenant ramps up: its 3 newest days one INSERT at a time, all done before the rest.
    by_tenant: dict[str, list[InsertInterval]] = defaultdict(list)
    for interval in intervals:
        by_tenant[tenant_of(interval)].append(interval)
    ramp_dates = {d.isoformat() for d in _days(FIRST, LAST)[-RAMP_DAYS:]}
    for tenant, group in by_tenant.items():
        ramp = [i for i in group if date_of(i) in ramp_dates]
        rest = [i for i in group if date_of(i) not in ramp_dates]
        assert max_overlap(ramp) == 1, tenant
        assert min(i.started_at for i in rest) >= max(i.finished_at for i in ramp), tenant

    # The cap holds across all tenants together, and the fleet did run in parallel.
    assert pool.limit == 3 and pool.claimed_slots == []
    assert 2 <= max_overlap(intervals) <= pool.limit


# On the production instance: the same backfill through the UI's path costs 90 s more on SQLite,
# where the one-action test above and test_ui_browser's dialog backfill already run.
@pytest.mark.parametrize("stack", [POSTGRES], indirect=True)
def test_asset_backfill_of_the_fleet_from_the_ui_runs_in_one_order(stack: DagsterStack) -> None:
    """The UI's Materialize… on the whole range (partition names, as the dialog sends them)."""
    api = DagsterApi(stack.url)
    assets = [f"tbt_raw_events_{d}" for d in DOMAINS]
    keys = [f"{day}|{org}.main" for day in _days(FIRST, LAST) for org in TENANTS]
    backfill_id = launch_like_the_ui(api, keys, assets)
    assert wait_for(api, backfill_id, TIMEOUT_SECONDS) == 0, stack.log_tail()

    _, intervals, pool = _fleet_runs(stack, backfill_id)
    counts = Counter((i.asset_key, i.partition_key) for i in intervals)
    assert set(counts) == {(a, k) for a in assets for k in keys}
    assert set(counts.values()) == {1}
    order = [(i.partition_key, i.asset_key) for i in intervals]
    inversions = [
        (older.partition_key, older.asset_key, newer.partition_key, newer.asset_key)
        for older, newer in unexplained_inversions(intervals, RAMP_DAYS)
    ]
    assert inversions == [], order
    assert 2 <= max_overlap(intervals) <= pool.limit
