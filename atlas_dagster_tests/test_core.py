"""The one home of calendar days and of the `date|tenant` key: listing, collapsing, parsing, and
a run's partition bounds read from its tags."""

from __future__ import annotations

import datetime as dt

from atlas_dagster.core.days import day_ranges, days_between
from atlas_dagster.core.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PARTITION_NAME_TAG,
)
from atlas_dagster.partitions import (
    TenantDay,
    date_of_key,
    is_tenant_day_key,
    partition_key,
    run_partition_bounds,
    split_key,
    tenant_of_key,
)

D = dt.date


def test_days_between_includes_both_ends_and_is_empty_backwards() -> None:
    assert days_between(D(2024, 2, 28), D(2024, 3, 1)) == [
        D(2024, 2, 28),
        D(2024, 2, 29),
        D(2024, 3, 1),
    ]
    assert days_between(D(2024, 3, 1), D(2024, 3, 1)) == [D(2024, 3, 1)]
    assert days_between(D(2024, 3, 2), D(2024, 3, 1)) == []


def test_day_ranges_collapse_unsorted_and_repeated_days() -> None:
    days = [D(2024, 1, 5), D(2024, 1, 3), D(2024, 1, 4), D(2024, 1, 4), D(2024, 1, 9)]
    assert day_ranges(days) == [(D(2024, 1, 3), D(2024, 1, 5)), (D(2024, 1, 9), D(2024, 1, 9))]
    assert day_ranges([]) == []


def test_the_key_codec_round_trips_and_tells_tenant_keys_apart() -> None:
    key = partition_key(D(2026, 11, 30), "acme.main")
    assert key == "2026-11-30|acme.main" == TenantDay(D(2026, 11, 30), "acme.main").partition_key
    assert split_key(key) == (D(2026, 11, 30), "acme.main")
    assert (date_of_key(key), tenant_of_key(key), is_tenant_day_key(key)) == (
        D(2026, 11, 30),
        "acme.main",
        True,
    )
    # a per-tenant asset's key (the client report) is no tenant-day
    assert (date_of_key("acme.main"), tenant_of_key("acme.main")) == (None, "")
    assert not is_tenant_day_key("acme.main")


def test_a_runs_bounds_come_from_its_partition_or_its_range_tags() -> None:
    assert run_partition_bounds({PARTITION_NAME_TAG: "k"}) == ("k", "k")
    ranged = {ASSET_PARTITION_RANGE_START_TAG: "a", ASSET_PARTITION_RANGE_END_TAG: "b"}
    assert run_partition_bounds(ranged) == ("a", "b")
    assert run_partition_bounds({ASSET_PARTITION_RANGE_START_TAG: "a"}) is None
    assert run_partition_bounds({}) is None
