"""The optional organization / brand / domain filter that every monitoring query binds."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from atlas_dagster.domains import get_domain
from atlas_dagster.tenants import TENANT_ID_RE, Tenant


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
