"""Scope, one home: whether a tenant-day is in scope for some domains (the tenant lists one and
covers the day), and the organization / brand / domain filter every monitoring query binds."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from atlas_dagster.domains import get_domain
from atlas_dagster.tenants import TENANT_ID_RE, Tenant


def in_scope(
    tenant: Tenant, domains: Iterable[str], day: dt.date, today: dt.date | None = None
) -> bool:
    """A raw asset has one domain; a gold asset is in scope when any of its sources is (each
    in its own window: a domain launched later has no days before its start)."""
    return any(
        domain in tenant.domains and tenant.covers(day, domain, today) for domain in domains
    )


@dataclass(frozen=True)
class Scope:
    """'' matches everything; values are bound as parameters, validated for clear errors."""

    organization_id: str = ""
    brand_id: str = ""
    domain: str = ""

    def __post_init__(self) -> None:
        for name in ("organization_id", "brand_id"):
            value = getattr(self, name)
            if value and not TENANT_ID_RE.fullmatch(value):
                raise ValueError(f"{name} {value!r} must match {TENANT_ID_RE.pattern}")
        if self.domain:
            get_domain(self.domain)

    def parameters(self) -> dict[str, str]:
        return asdict(self)

    def matches(self, tenant: Tenant) -> bool:
        return (
            self.organization_id in ("", tenant.organization_id)
            and self.brand_id in ("", tenant.brand_id)
            and self.domain in ("", *tenant.domains)
        )

    def domains_of(self, tenant: Tenant) -> tuple[str, ...]:
        return tuple(d for d in tenant.domains if self.domain in ("", d))


EVERYTHING = Scope()
