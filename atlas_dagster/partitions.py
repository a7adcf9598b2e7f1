"""The date|tenant partitions shared by every raw and gold asset, derived from the tenants file,
and the one order of work over them: the newest day first (`newest_first_key`, `day_priority`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dagster import (
    AssetKey,
    DagsterInstance,
    DailyPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    StaticPartitionsDefinition,
)

from atlas_dagster.core.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PARTITION_NAME_TAG,
)
from atlas_dagster.dagster_internals import backfill_target_partitions
from atlas_dagster.domains import RAW_ASSET_KEYS
from atlas_dagster.tenants import Tenant, TenantConfigError


@dataclass(frozen=True, order=True)
class TenantDay:
    """One partition: a tenant's UTC day."""

    partition_date: dt.date
    tenant_key: str

    @property
    def partition_key(self) -> str:
        return partition_key(self.partition_date, self.tenant_key)


def partition_key(day: dt.date, tenant_key: str) -> str:
    """(date, tenant key) → '2026-11-30|acme.main'; split_key is its inverse."""
    return f"{day.isoformat()}|{tenant_key}"


def partitions_for(tenants: list[Tenant]) -> MultiPartitionsDefinition:
    """Days from the earliest tenant start; they end with the latest tenant end, unless a tenant
    has no end_date (its window grows by one day every day). No tenant is a configuration error:
    a partition set with no tenant would be a made-up one that nothing can load."""
    _require_tenants(tenants)
    start = min(t.start_date for t in tenants)
    open_ended = any(t.end_date is None for t in tenants)
    # DailyPartitionsDefinition's end_date is exclusive.
    end = None if open_ended else max(t.last_date() for t in tenants) + dt.timedelta(days=1)
    return MultiPartitionsDefinition(
        {
            "date": DailyPartitionsDefinition(
                start_date=start.isoformat(), end_date=end.isoformat() if end else None
            ),
            "tenant": tenant_partitions(tenants),
        }
    )


def tenant_partitions(tenants: list[Tenant]) -> StaticPartitionsDefinition:
    """The tenant dimension, in tenants-file order: also the partitions of per-tenant assets."""
    _require_tenants(tenants)
    return StaticPartitionsDefinition([t.key for t in tenants])


def _require_tenants(tenants: list[Tenant]) -> None:
    if not tenants:
        raise TenantConfigError(
            "the tenants file lists no tenant: add one (organization_id, brand_id, source, "
            "start_date) before the code location can define its partitions"
        )


def tenants_in_range(tenants: list[Tenant], first_key: str, last_key: str) -> list[Tenant]:
    """The tenants from one tenant key to another in the tenant dimension's order (a range of
    `date|tenant` keys or of tenant keys: each end's tenant part)."""
    keys = [t.key for t in tenants]
    first, last = _tenant_part(first_key), _tenant_part(last_key)
    if first not in keys or last not in keys:
        return []
    return tenants[keys.index(first) : keys.index(last) + 1]


def _tenant_part(key: str) -> str:
    return split_key(key)[1] if is_tenant_day_key(key) else key


def is_tenant_day_key(partition_key: str) -> bool:
    """A `date|tenant` key (raw and gold assets), not a tenant key (per-tenant assets)."""
    return "|" in partition_key


def date_of_key(partition_key: str) -> dt.date | None:
    """The day of a `date|tenant` key, or None for a key that is not one (a tenant key)."""
    try:
        return dt.date.fromisoformat(partition_key.split("|", 1)[0])
    except ValueError:
        return None


def tenant_of_key(partition_key: str) -> str:
    """The tenant of a `date|tenant` key, or '' for a key that is not one."""
    return partition_key.split("|", 1)[1] if is_tenant_day_key(partition_key) else ""


def run_partition_bounds(tags: Mapping[str, str]) -> tuple[str, str] | None:
    """(first, last) partition key of a run, from its tags, or None for an unpartitioned run."""
    if PARTITION_NAME_TAG in tags:
        return tags[PARTITION_NAME_TAG], tags[PARTITION_NAME_TAG]
    if ASSET_PARTITION_RANGE_START_TAG in tags and ASSET_PARTITION_RANGE_END_TAG in tags:
        return tags[ASSET_PARTITION_RANGE_START_TAG], tags[ASSET_PARTITION_RANGE_END_TAG]
    return None


def backfill_raw_partitions(
    instance: DagsterInstance, backfill_id: str
) -> dict[AssetKey, list[str]]:
    """The raw partitions a backfill targets, per raw asset (a fleet's: what its leader loads)."""
    target = backfill_target_partitions(instance, backfill_id) or {}
    return {
        asset_key: list(subset.get_partition_keys())
        for asset_key, subset in target.items()
        if asset_key in RAW_ASSET_KEYS
    }


def split_key(partition_key: MultiPartitionKey | str) -> tuple[dt.date, str]:
    """'2026-11-30|acme.main' → (date, tenant key)."""
    day, _, tenant = str(partition_key).partition("|")
    return dt.date.fromisoformat(day), tenant


# The runbook loads from the most recent day to the oldest. Every ordering of days (a run's
# works, its ramp-up days, the queue's and the pool's priorities, what the CLI lists) goes through
# the two functions below, so that the rule has one home.
_PRIORITY_EPOCH = dt.date(2000, 1, 1)


def newest_first_key(day: dt.date, *then: str) -> tuple[int | str, ...]:
    """The sort key of the one order: the newest day first, then `then` (tenant, domain, …)
    ascending."""
    return (-day.toordinal(), *then)


def newest_first(days: Iterable[dt.date]) -> list[dt.date]:
    """Days in the order the project loads and lists them."""
    return sorted(days, key=newest_first_key)


def day_priority(day: dt.date) -> int:
    """The same order as a priority (the run queue's `dagster/priority`, a pool claim's): higher
    for newer days, so that contended slots and queued runs go to the newest day first."""
    return day.toordinal() - _PRIORITY_EPOCH.toordinal()


def tenant_days_newest_first(partition_keys: Iterable[MultiPartitionKey | str]) -> list[TenantDay]:
    """The partitions of a run (one key or a range), newest day first, then by tenant."""
    days = [TenantDay(*split_key(key)) for key in partition_keys]
    return sorted(days, key=lambda d: newest_first_key(d.partition_date, d.tenant_key))
