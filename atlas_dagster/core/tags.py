"""Every run tag atlas-dagster reads or writes, named once: Dagster's (through the adapter
`dagster_internals`, since Dagster keeps them in an internal module) and atlas-dagster's own."""

from __future__ import annotations

from atlas_dagster.dagster_internals import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    BACKFILL_ID_TAG,
    PARTITION_NAME_TAG,
    PRIORITY_TAG,
    WILL_RETRY_TAG,
)

# The run coordinator's: a backfill's raw run held in the queue until the backfill has submitted
# all of them (tag limit 0), and the lane group that serializes runs loading the same tenant.
HELD_TAG = "atlas/held"
LANE_GROUP_TAG = "atlas/backfill-lanes"
# A fleet backfill (raw runs over several tenants): one run loads the whole target, so that one
# scheduler orders every tenant's days newest first; the others find their days covered by it.
FLEET_LEADER_TAG = "atlas/fleet-leader"
COVERED_BY_TAG = "atlas/covered-by"
# The raw run's effective INSERT concurrency, as backpressure last set it ("2 of 3 (...)").
CONCURRENCY_TAG = "atlas/insert_concurrency"
# The raw run's days left and their time at the measured pace (monitoring/pace.py), which
# `backfill --wait` shows ("120 of 400 tenant-day(s) left, about 14.2 min at the measured pace").
TIME_LEFT_TAG = "atlas/time_left"
# Set by the CLI on what it launches: a fleet backfill's window, a tenant's backfill, a verify run.
FLEET_TAG = "atlas/fleet"
TENANT_TAG = "atlas/tenant"
VERIFY_TAG = "atlas/verify"
# Which days of its range a raw run loads (orchestration/selection.py): set by `backfill` and
# `load`, kept by Dagster's retries of the run; absent (a launch from the UI) loads every day.
SELECT_TAG = "atlas/select"

__all__ = [
    "ASSET_PARTITION_RANGE_END_TAG",
    "ASSET_PARTITION_RANGE_START_TAG",
    "BACKFILL_ID_TAG",
    "CONCURRENCY_TAG",
    "COVERED_BY_TAG",
    "FLEET_LEADER_TAG",
    "FLEET_TAG",
    "HELD_TAG",
    "LANE_GROUP_TAG",
    "PARTITION_NAME_TAG",
    "PRIORITY_TAG",
    "SELECT_TAG",
    "TENANT_TAG",
    "TIME_LEFT_TAG",
    "VERIFY_TAG",
    "WILL_RETRY_TAG",
]
