"""Re-delivered days: which completed days' exports changed at the source since they were loaded.

One listing pass per tenant-domain window (no footer, no data read) against the fingerprint each
day's load stored in backfill_log: a day is changed when a file was added, removed or replaced
(another size, ETag or mtime). Days loaded before fingerprints were recorded cannot be compared
and are never reported changed. No row reaches Python.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.exports.fingerprint import changes, decode
from atlas_dagster.exports.layout import ExportError, ExportSource
from atlas_dagster.partitions import newest_first, newest_first_key
from atlas_dagster.resources.connection import query_rows
from atlas_dagster.tenants import Tenant


@dataclass(frozen=True)
class ChangedDay:
    tenant: Tenant
    domain: str
    partition_date: dt.date
    reason: str  # e.g. "part-00001.parquet replaced; 2 files added: …"

    def as_json(self) -> dict[str, str]:
        return {
            "organization_id": self.tenant.organization_id,
            "brand_id": self.tenant.brand_id,
            "domain": self.domain,
            "partition_date": self.partition_date.isoformat(),
            "reason": self.reason,
        }


@dataclass
class ChangeScan:
    """The changed days found, newest first, and the windows that could not be listed."""

    changed: list[ChangedDay] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)  # "org.brand domain: why"
    listed_days: int = 0

    def days(self, tenant: Tenant, domain: str) -> set[dt.date]:
        return {c.partition_date for c in self.changed if c.tenant == tenant and c.domain == domain}


def loaded_fingerprints(
    client: Client, tenant: Tenant, domains: list[str], first: dt.date, last: dt.date
) -> dict[tuple[str, dt.date], str]:
    """(domain, day) → the stored fingerprint of every completed day in the window."""
    parameters = {
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "domains": domains,
        "first_day": first,
        "last_day": last,
    }
    rows = query_rows(client, sql.query("loaded_fingerprints"), parameters)
    return {(r["domain"], r["partition_date"]): str(r["source_files"]) for r in rows}


def scan_tenant(
    client: Client,
    tenant: Tenant,
    domains: list[str],
    first: dt.date,
    last: dt.date,
    scan: ChangeScan | None = None,
    source: ExportSource | None = None,
) -> ChangeScan:
    """The tenant's changed days among `domains` in first..last, added to `scan`: one query for
    the stored fingerprints, then one listing pass per domain over the days that have one."""
    scan = scan if scan is not None else ChangeScan()
    stored = loaded_fingerprints(client, tenant, domains, first, last)
    source = source or ExportSource(tenant)
    for domain in domains:
        loaded = {
            day: stamps
            for (name, day), text in stored.items()
            if name == domain and (stamps := decode(text)) is not None
        }
        if not loaded:
            continue
        scan.listed_days += len(loaded)
        listed = source.stamp_window(domain, sorted(loaded))
        unlisted = {day: now for day, now in listed.items() if isinstance(now, ExportError)}
        if unlisted:
            day = max(unlisted)
            scan.unlisted.append(
                f"{tenant.key} {domain}: {len(unlisted)} loaded day(s) could not be listed, "
                f"e.g. {day}: {unlisted[day]}"
            )
        for day in newest_first(loaded):
            now = listed[day]
            if not isinstance(now, ExportError) and (reason := changes(loaded[day], now)):
                scan.changed.append(ChangedDay(tenant, domain, day, reason))
    # Newest day first across domains and tenants, as every launch path loads them.
    scan.changed.sort(key=lambda c: newest_first_key(c.partition_date, c.tenant.key, c.domain))
    return scan
