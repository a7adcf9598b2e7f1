"""Scope, one home: whether a tenant-day is in scope for some domains (the tenant lists one and
covers the day), the load's refusal of one that is not, and the organization / brand / domain
filter every monitoring query binds."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from atlas_dagster.domains import Domain, get_domain
from atlas_dagster.tenants import TENANT_ID_RE, Tenant


class PartitionOutOfScope(ValueError):
    """The partition is outside the tenant's window or domains: refused with no log row."""


class OutsideDomainWindow(PartitionOutOfScope):
    """The day is in the tenant's window but before or after the domain's own dates: the domain
    has no such day (a range over all domains skips it rather than fail it)."""


def in_scope(
    tenant: Tenant, domains: Iterable[str], day: dt.date, today: dt.date | None = None
) -> bool:
    """A raw asset has one domain; a gold asset is in scope when any of its sources is (each
    in its own window: a domain launched later has no days before its start)."""
    return any(domain in tenant.domains and tenant.covers(day, domain, today) for domain in domains)


def check_scope(tenant: Tenant, domain: Domain, day: dt.date) -> None:
    """Refuses a tenant-day outside the tenant's domains or windows, before anything is read."""
    if domain.name not in tenant.domains:
        raise PartitionOutOfScope(
            f"tenant {tenant.key} does not list domain {domain.name!r} "
            f"(it lists {list(tenant.domains)})"
        )
    if not tenant.covers(day):
        raise PartitionOutOfScope(
            f"{day} is outside tenant {tenant.key}'s window "
            f"{tenant.start_date}..{tenant.last_date()}"
        )
    if not tenant.covers(day, domain.name):
        first, last = tenant.window(domain.name)
        raise OutsideDomainWindow(
            f"{day} is outside domain {domain.name}'s own window {first}..{last} "
            f"(tenant {tenant.key})"
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
