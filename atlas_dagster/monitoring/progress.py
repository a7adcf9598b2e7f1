"""The one count of a backfill's progress: each tenant-domain's window, its days done, failed and
running and their rows, read in one query for any number of tenants (sql/queries/progress.sql),
and the time left at the measured pace (pace.time_left).

Invariants: a window is the tenant's start to its last day (of the domain's own dates), never
past yesterday (no export exists yet); days outside it are not counted, whatever the log holds;
`status`, the raw run's progress metadata and the client report count through here only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.monitoring.pace import Pace, time_left
from atlas_dagster.resources.connection import query_rows
from atlas_dagster.tenants import Tenant


@dataclass(frozen=True)
class DomainCount:
    """One tenant-domain's window and what the log says of its days."""

    tenant_key: str
    domain: str
    first_day: dt.date
    last_day: dt.date
    done: int = 0
    failed: int = 0
    running: int = 0
    rows_loaded: int = 0
    source_rows: int = 0  # the completed days' export rows: the unit of the measured pace
    first_done: dt.date | None = None
    last_done: dt.date | None = None
    last_activity: dt.datetime | None = None

    @property
    def window_days(self) -> int:
        return (self.last_day - self.first_day).days + 1

    @property
    def days_left(self) -> int:
        return max(0, self.window_days - self.done)

    @property
    def missing(self) -> int:
        """Days with no log row at all (never tried)."""
        return max(0, self.window_days - self.done - self.failed - self.running)

    def time_left(self, pace: Pace | None, limit: int | None) -> float | None:
        """The days left at `pace`, at most `limit` loads at once (pace.time_left)."""
        return time_left(pace, self.days_left, self.done, self.source_rows, limit)


def tenant_window(
    tenant: Tenant, today: dt.date | None = None, domain: str | None = None
) -> tuple[dt.date, dt.date] | None:
    """start_date..last_date() (of `domain`'s own dates when named), without days that have not
    happened yet (no export exists); None when no day of it has ended."""
    today = today or dt.datetime.now(dt.UTC).date()
    first, last = tenant.window(domain, today)
    last = min(last, today - dt.timedelta(days=1))
    return (first, last) if first <= last else None


def count_progress(
    client: Client,
    tenants: Iterable[Tenant],
    today: dt.date | None = None,
    domains: Iterable[str] | None = None,
) -> dict[tuple[str, str], DomainCount]:
    """Every tenant's domains (those of `domains` when given) with a window, by (tenant key,
    domain); a tenant-domain the log holds nothing of counts zeros."""
    counts: dict[tuple[str, str], DomainCount] = {}
    owners: list[Tenant] = []
    wanted = set(domains) if domains is not None else None
    for tenant in tenants:
        for domain in tenant.domains:
            window = tenant_window(tenant, today, domain)
            if window is not None and (wanted is None or domain in wanted):
                counts[(tenant.key, domain)] = DomainCount(tenant.key, domain, *window)
                owners.append(tenant)
    if not counts:
        return counts
    keys = {(t.organization_id, t.brand_id): t.key for t in owners}
    windows = list(counts.values())
    parameters = {
        "organization_ids": [t.organization_id for t in owners],
        "brand_ids": [t.brand_id for t in owners],
        "domains": [c.domain for c in windows],
        "first_days": [c.first_day for c in windows],
        "last_days": [c.last_day for c in windows],
    }
    for row in query_rows(client, sql.query("progress"), parameters):
        key = (keys[(row["organization_id"], row["brand_id"])], row["domain"])
        window = counts[key]
        done = int(row["days_done"])
        counts[key] = DomainCount(
            window.tenant_key,
            window.domain,
            window.first_day,
            window.last_day,
            done=done,
            failed=int(row["days_failed"]),
            running=int(row["days_running"]),
            rows_loaded=int(row["rows_loaded"]),
            source_rows=int(row["source_rows"]),
            first_done=row["first_done"] if done else None,
            last_done=row["last_done"] if done else None,
            last_activity=row["last_activity"],
        )
    return counts
