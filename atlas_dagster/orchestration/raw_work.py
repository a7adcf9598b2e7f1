"""A raw run's units: one tenant-day of one domain (RawWork), which units a range of partitions
yields (plan_works: skipped or refused when out of scope), and what became of each (RawResult)
in the words of the run log and of its materialization's metadata."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from dagster import AssetKey, MetadataValue

from atlas_dagster.checks.raw import CheckedDay
from atlas_dagster.domains import DOMAINS, Domain
from atlas_dagster.loading.day_load import DayLoad
from atlas_dagster.loading.faults import Fault
from atlas_dagster.partitions import TenantDay, tenant_days_newest_first
from atlas_dagster.scope import OutsideDomainWindow, PartitionOutOfScope, check_scope
from atlas_dagster.tenants import Tenant, TenantConfigError, tenant_by_key


@dataclass(frozen=True)
class RawWork:
    """One tenant-day of one domain."""

    tenant: Tenant
    domain: Domain
    tenant_day: TenantDay

    @property
    def asset_key(self) -> AssetKey:
        return AssetKey(self.domain.raw_table)

    @property
    def partition_key(self) -> str:
        return self.tenant_day.partition_key

    @property
    def label(self) -> str:
        return f"{self.domain.raw_table} {self.partition_key}"


@dataclass
class RawResult:
    work: RawWork
    load: DayLoad | None = None
    error: str = ""
    # What the day's checks will need of it once it has settled (None: never attempted).
    checked: CheckedDay | None = None
    # When the scheduler handed the day to a worker, and when it counted the day done (its
    # tenant's next day could be dispatched from then on): the fleet order is judged from them.
    dispatched_at: float = field(default_factory=time.time)
    settled_at: float | None = None
    insert_started_at: float | None = None
    insert_finished_at: float | None = None
    progress: dict[str, MetadataValue] = field(default_factory=dict)
    # The last try's failure, what loading/faults.py makes of it, and the tries made.
    exception: BaseException | None = None
    fault: Fault | None = None
    attempts: int = 1


def domains_by_key(keys: set[AssetKey]) -> list[Domain]:
    return [d for d in DOMAINS.values() if AssetKey(d.raw_table) in keys]


def plan_works(
    tenants: list[Tenant], domains: list[Domain], partition_keys: list[str]
) -> tuple[list[RawWork], list[tuple[RawWork | None, str, str]], int]:
    """Works in order (newest day, tenant, domain), (work, partition, reason) refused ones, and
    how many were skipped.

    A range over several tenants (a fleet run) is a rectangle of dates × tenants, so it covers
    days outside some tenants' windows or domains they do not list: those are skipped, not
    failed. A run of one tenant names its days explicitly: they are refused, except days inside
    the tenant's window that a domain with its own dates does not have (a range over all raw
    assets covers them), which are skipped.
    """
    works: list[RawWork] = []
    refused: list[tuple[RawWork | None, str, str]] = []
    skipped = 0
    tenant_days = tenant_days_newest_first(partition_keys)
    fleet = len({d.tenant_key for d in tenant_days}) > 1
    for tenant_day in tenant_days:
        try:
            tenant = tenant_by_key(tenants, tenant_day.tenant_key)
        except TenantConfigError as exc:
            refused.append((None, tenant_day.partition_key, str(exc)))
            continue
        for domain in domains:
            work = RawWork(tenant, domain, tenant_day)
            try:
                check_scope(tenant, domain, tenant_day.partition_date)
            except PartitionOutOfScope as exc:
                if fleet or isinstance(exc, OutsideDomainWindow):
                    skipped += 1
                else:
                    refused.append((work, tenant_day.partition_key, str(exc)))
                continue
            works.append(work)
    return works, refused, skipped


def tries_text(result: RawResult) -> str:
    """How the failure was judged, for the run log's failure line."""
    fault = result.fault
    if fault is None:
        return ""
    if fault.transient:
        return f" after {result.attempts} tries, the last transient ({fault.cause})"
    return f" at try {result.attempts}, permanent ({fault.cause}): not retried"


def load_metadata(result: RawResult) -> dict[str, MetadataValue]:
    load = result.load
    assert load is not None
    return {
        "rows_loaded": MetadataValue.int(load.rows_loaded),
        "source_rows": MetadataValue.int(load.source_rows),
        "duplicate_rows": MetadataValue.int(load.duplicate_rows),
        "files": MetadataValue.int(load.files),
        "bytes": MetadataValue.int(load.bytes),
        "s3_path": MetadataValue.path(load.s3_path),
        "duration_seconds": MetadataValue.float(round(load.duration_seconds, 3)),
        "insert_seconds": MetadataValue.float(round(load.insert_seconds, 3)),
        "dispatched_at": MetadataValue.timestamp(result.dispatched_at),
        "settled_at": MetadataValue.timestamp(result.settled_at or 0.0),
        "insert_started_at": MetadataValue.timestamp(result.insert_started_at or 0.0),
        "insert_finished_at": MetadataValue.timestamp(result.insert_finished_at or 0.0),
        "clickhouse_query_id": MetadataValue.text(load.query_id),
        "attempt": MetadataValue.int(load.attempt),
        # Where the day's time went (validation, engine session, INSERT, counts, checks).
        "load_phases": MetadataValue.json(load.phases.as_json()),
        **result.progress,
    }
