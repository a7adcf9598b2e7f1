"""Whether a tenant-day is in scope for some domains: the tenant lists one and covers the day."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from atlas_dagster.tenants import Tenant


def in_scope(
    tenant: Tenant, domains: Iterable[str], day: dt.date, today: dt.date | None = None
) -> bool:
    """A raw asset has one domain; a gold asset is in scope when any of its sources is (each
    in its own window: a domain launched later has no days before its start)."""
    return any(
        domain in tenant.domains and tenant.covers(day, domain, today) for domain in domains
    )
