"""The backfill's status from backfill_log: progress, pending failures, gaps, stale loads, and
loaded days whose exports changed since (one listing per tenant-domain window)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from clickhouse_connect.driver.client import Client
from dagster import DagsterInstance

from atlas_dagster import sql
from atlas_dagster.checks.changes import ChangeScan, scan_tenant
from atlas_dagster.monitoring.pace import read_paces
from atlas_dagster.monitoring.progress import count_progress, tenant_window
from atlas_dagster.monitoring.stale_loads import find_stale, running_loads
from atlas_dagster.resources.connection import query_rows
from atlas_dagster.scope import Scope
from atlas_dagster.tenants import Tenant

Row = dict[str, object]

# The monitoring guide's gap query looks at the last 180 days.
GAP_WINDOW_DAYS = 180
# Tenants whose exports `status` lists for re-delivered days unless told otherwise: a listing of
# 3 years costs ~0.54 s a tenant on local files here (docs/benchmarks.md), so a fleet-wide status
# lists only when asked (--changes).
CHANGE_SCAN_TENANTS = 10


@dataclass(frozen=True)
class StatusReport:
    progress: list[Row]
    failures: list[Row]
    gaps: list[Row]
    stale: list[Row]
    # Completed days whose export changed since the load (checks/changes.py), newest first,
    # and the windows that could not be listed to tell.
    changed: list[Row] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)
    changes_scanned: bool = True

    def as_json(self) -> dict[str, object]:
        tables = {
            name: [{key: _jsonable(value) for key, value in row.items()} for row in rows]
            for name, rows in vars(self).items()
            if isinstance(rows, list) and name != "unlisted"
        }
        return tables | {"unlisted": self.unlisted, "changes_scanned": self.changes_scanned}


def _jsonable(value: object) -> object:
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return value


def with_time_left(
    client: Client, tenants: list[Tenant], progress: list[Row], limit: int | None
) -> list[Row]:
    """Each progress row with its tenant-domain's days left in its window and the time they
    take at the domain's measured pace (monitoring/progress.py, the one count); None where
    unknown (a tenant no longer in the tenants file, a domain it does not list, nothing loaded)."""
    by_key = {(t.organization_id, t.brand_id): t for t in tenants}
    involved = {
        t.key: t
        for row in progress
        if (t := by_key.get((str(row["organization_id"]), str(row["brand_id"])))) is not None
    }
    counts = count_progress(client, involved.values())
    paces = read_paces(client, {str(row["domain"]) for row in progress})
    for row in progress:
        domain = str(row["domain"])
        tenant = by_key.get((str(row["organization_id"]), str(row["brand_id"])))
        count = counts.get((tenant.key, domain)) if tenant is not None else None
        seconds = count.time_left(paces[domain], limit) if count is not None else None
        row |= {
            "days_left": count.days_left if count is not None else None,
            "time_left_seconds": None if seconds is None else round(seconds, 1),
        }
    return progress


def gap_window(
    tenant: Tenant,
    days: int = GAP_WINDOW_DAYS,
    today: dt.date | None = None,
    domain: str | None = None,
) -> tuple[dt.date, dt.date] | None:
    """The tenant's last `days` days; for an open-ended tenant, the guide's today-180..today-1."""
    window = tenant_window(tenant, today, domain)
    if window is None:
        return None
    first, last = window
    return max(first, last - dt.timedelta(days=days - 1)), last


def tenant_days(client: Client, tenant: Tenant, first: dt.date, last: dt.date) -> list[Row]:
    parameters = {
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "first_day": first,
        "last_day": last,
    }
    return query_rows(client, sql.query("status/tenant_days"), parameters)


def gaps(client: Client, tenants: list[Tenant], scope: Scope, days: int) -> list[Row]:
    """Days of each tenant's gap window with no completed load, for each of its domains, in one
    query for the whole fleet (one query per tenant cost 1.8 s at 100 tenants)."""
    windows = [
        (tenant, domain, window)
        for tenant in tenants
        if scope.matches(tenant)
        for domain in sorted(scope.domains_of(tenant))
        if (window := gap_window(tenant, days, domain=domain)) is not None
    ]
    if not windows:
        return []
    parameters = {
        "organization_ids": [t.organization_id for t, _, _ in windows],
        "brand_ids": [t.brand_id for t, _, _ in windows],
        "domains": [d for _, d, _ in windows],
        "first_days": [w[0] for _, _, w in windows],
        "last_days": [w[1] for _, _, w in windows],
    }
    return query_rows(client, sql.query("status/gaps"), parameters)


def stale_rows(client: Client, scope: Scope, instance: DagsterInstance | None) -> list[Row]:
    rows = []
    for item in find_stale(running_loads(client, scope), instance):
        load = vars(item.load) | {"reason": item.reason}
        del load["version"]
        rows.append(load)
    return rows


def changed(client: Client, tenants: list[Tenant], scope: Scope) -> ChangeScan:
    """Every tenant in scope's completed days whose export changed since their load, over its
    whole window: one fingerprint query per tenant, one listing pass per tenant-domain."""
    scan = ChangeScan()
    for tenant in tenants:
        if not scope.matches(tenant):
            continue
        window = tenant_window(tenant)
        if window is not None:
            domains = sorted(scope.domains_of(tenant))
            scan_tenant(client, tenant, domains, *window, scan=scan)
    return scan


def collect(
    client: Client,
    tenants: list[Tenant],
    scope: Scope,
    instance: DagsterInstance | None,
    gap_days: int = GAP_WINDOW_DAYS,
    changes: bool | None = None,
    limit: int | None = None,
) -> StatusReport:
    """`instance` None: stale loads are judged by their worker's liveness only. `changes`: list
    the exports for re-delivered days (None: when the scope holds CHANGE_SCAN_TENANTS or
    fewer tenants). `limit`: the pool's limit, the most loads the time left counts at once."""
    parameters = scope.parameters()
    if changes is None:
        changes = sum(1 for t in tenants if scope.matches(t)) <= CHANGE_SCAN_TENANTS
    scan = changed(client, tenants, scope) if changes else ChangeScan()
    progress = query_rows(client, sql.query("status/progress"), parameters)
    return StatusReport(
        progress=with_time_left(client, tenants, progress, limit),
        failures=query_rows(client, sql.query("status/failures"), parameters),
        gaps=gaps(client, tenants, scope, gap_days),
        stale=stale_rows(client, scope, instance),
        changed=[day.as_json() for day in scan.changed],
        unlisted=scan.unlisted,
        changes_scanned=changes,
    )
