"""The date|tenant partitions shared by every raw asset, derived from the tenants file."""

from __future__ import annotations

import datetime as dt

from dagster import (
    DailyPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    StaticPartitionsDefinition,
)

from atlas_dagster.tenants import Tenant


def partitions_for(tenants: list[Tenant]) -> MultiPartitionsDefinition:
    start = min((t.start_date for t in tenants), default=dt.date(2026, 1, 1))
    keys = [t.key for t in tenants] or ["none.none"]
    return MultiPartitionsDefinition(
        {
            "date": DailyPartitionsDefinition(start_date=start.isoformat()),
            "tenant": StaticPartitionsDefinition(keys),
        }
    )


def split_key(partition_key: MultiPartitionKey | str) -> tuple[dt.date, str]:
    """'2026-11-30|acme.main' → (date, tenant key)."""
    day, _, tenant = str(partition_key).partition("|")
    return dt.date.fromisoformat(day), tenant
