"""What a backfill will load: a tenant's days × domains newest first and their size, or a fleet's
rectangle of dates × tenants (one ranged run)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from atlas_dagster.domains import DOMAINS, Domain, get_domain
from atlas_dagster.exports.layout import DayExport, ExportError, ExportSource
from atlas_dagster.monitoring.pace import read_pace
from atlas_dagster.orchestration.selection import Selection, select_days
from atlas_dagster.partitions import newest_first, partition_key
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.settings import LoadSettings
from atlas_dagster.tenants import Tenant, TenantConfigError
from atlas_dagster.validation.schema import ValidationError, day_schemas


@dataclass(frozen=True)
class PlannedDay:
    domain: Domain
    partition_date: dt.date
    reason: str  # why it is in the plan (selection.reason): 'all', 'missing', 'failed', …

    @property
    def label(self) -> str:
        return f"{self.partition_date} {self.domain.name}"


@dataclass
class BackfillPlan:
    tenant: Tenant
    domains: list[Domain]
    start: dt.date
    end: dt.date
    days: list[PlannedDay] = field(default_factory=list)

    def partition_keys(self, domain: Domain) -> list[str]:
        return [
            partition_key(d.partition_date, self.tenant.key)
            for d in self.days
            if d.domain == domain
        ]


def resolve_window(
    tenant: Tenant, start: dt.date | None, end: dt.date | None
) -> tuple[dt.date, dt.date]:
    first, last = start or tenant.start_date, end or tenant.last_date()
    if first > last:
        raise TenantConfigError(f"--start {first} is after --end {last}")
    if not (tenant.covers(first) and tenant.covers(last)):
        raise TenantConfigError(
            f"{first}..{last} is not inside tenant {tenant.key}'s window "
            f"{tenant.start_date}..{tenant.last_date()}"
        )
    return first, last


def resolve_domains(tenant: Tenant, names: list[str] | None) -> list[Domain]:
    domains = [get_domain(name) for name in (names or tenant.domains)]
    unlisted = [d.name for d in domains if d.name not in tenant.domains]
    if unlisted:
        raise TenantConfigError(
            f"tenant {tenant.key} does not list {unlisted} (it lists {list(tenant.domains)})"
        )
    return domains


@dataclass(frozen=True)
class FleetPlan:
    """Every tenant's days of one date window, as one ranged run over dates × tenants.

    The tenants are the partitions' tenant dimension in tenants.yaml order, so the first and last
    tenant bound a range holding all of them; days outside a tenant's window are skipped by the
    run, not failed.
    """

    tenants: list[Tenant]
    domains: list[Domain]
    start: dt.date
    end: dt.date

    @property
    def partition_range(self) -> tuple[str, str]:
        first, last = self.tenants[0].key, self.tenants[-1].key
        return partition_key(self.start, first), partition_key(self.end, last)

    def tenant_days(self, tenant: Tenant) -> int:
        """The tenant's day-domains inside the window (what the run loads for it), each domain
        within its own dates."""
        total = 0
        for domain in self.domains:
            if domain.name in tenant.domains:
                first, last = tenant.window(domain.name)
                total += max(0, (min(self.end, last) - max(self.start, first)).days + 1)
        return total


def build_fleet_plan(
    tenants: list[Tenant],
    domain_names: list[str] | None,
    start: dt.date | None,
    end: dt.date | None,
) -> FleetPlan:
    if not tenants:
        raise TenantConfigError("the tenants file lists no tenant")
    first = start or min(t.start_date for t in tenants)
    last = end or max(t.last_date() for t in tenants)
    if first > last:
        raise TenantConfigError(f"--start {first} is after --end {last}")
    listed = {name for t in tenants for name in t.domains}
    domains = (
        [get_domain(n) for n in domain_names]
        if domain_names
        else [d for d in DOMAINS.values() if d.name in listed]
    )
    unlisted = [d.name for d in domains if d.name not in listed]
    if unlisted:
        raise TenantConfigError(f"no tenant lists {unlisted}")
    return FleetPlan(tenants, domains, first, last)


def build_plan(
    clickhouse: ClickHouseResource,
    tenant: Tenant,
    domain_names: list[str] | None,
    start: dt.date | None,
    end: dt.date | None,
    selection: Selection = Selection.ALL,
) -> BackfillPlan:
    """The days to load, newest first, as `selection` takes them (orchestration/selection.py:
    the same rule the launched run applies again when it starts)."""
    first, last = resolve_window(tenant, start, end)
    plan = BackfillPlan(tenant, resolve_domains(tenant, domain_names), first, last)
    window = [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]
    if selection is Selection.ALL:  # nothing to read: no engine opened
        selected = {(d.name, day): "all" for d in plan.domains for day in window}
    else:
        with clickhouse.session() as client:
            ensure_schema(client)
            selected = select_days(client, tenant, plan.domains, window, selection)
    for day in newest_first(window):
        for domain in plan.domains:
            # Before the domain's own start, or after: not one of the tenant's days.
            reason = selected.get((domain.name, day))
            if reason is not None and tenant.covers(day, domain.name):
                plan.days.append(PlannedDay(domain, day, reason))
    return plan


@dataclass(frozen=True)
class DaySize:
    planned: PlannedDay
    export: DayExport | None
    error: str = ""  # why the day cannot load: its listing, or its files' schema or statistics


def export_sizes(plan: BackfillPlan) -> list[DaySize]:
    """Files, bytes and rows of every planned day, and the refusals its footers already show
    (schema, types, statistics), from one listing pass per domain and the footers only, their
    statistics validated in one pass per domain (day_schemas): no row is read and nothing is
    written."""
    source = ExportSource(plan.tenant)
    listed: dict[tuple[str, dt.date], DayExport | ExportError] = {}
    for domain in plan.domains:
        days = [d.partition_date for d in plan.days if d.domain == domain]
        if days:
            found = source.list_window(domain.name, days)
            listed |= {(domain.name, day): export for day, export in found.items()}
    schemas: dict[tuple[str, dt.date], object] = {}
    for domain in plan.domains:
        exports = {
            day: export
            for (name, day), export in listed.items()
            if name == domain.name and isinstance(export, DayExport)
        }
        found = day_schemas(exports, domain, plan.tenant)
        schemas |= {(domain.name, day): schema for day, schema in found.items()}
    sizes = []
    for planned in plan.days:
        key = (planned.domain.name, planned.partition_date)
        export, schema = listed[key], schemas.get(key)
        if isinstance(export, ExportError):
            sizes.append(DaySize(planned, None, str(export)))
        elif isinstance(schema, ValidationError):
            sizes.append(DaySize(planned, export, f"refused: {schema}"))
        elif isinstance(schema, Exception):
            raise schema  # not the contract (a read that failed): raised as check_schema did
        else:
            sizes.append(DaySize(planned, export))
    return sizes


@dataclass(frozen=True)
class Estimate:
    rows_per_second: float
    measured_days: int
    seconds: float
    parallel: float  # loads at once, as measured, at most the pool's limit


def estimate_duration(
    clickhouse: ClickHouseResource,
    plan: BackfillPlan,
    sizes: list[DaySize],
    load: LoadSettings,
    limit: int,
) -> Estimate | None:
    """At the pace measured on this target's recent loads (monitoring/pace.py), with `load`'s
    ramp-up days one at a time and at most `limit` (the pool's live limit) at once; None before
    any load."""
    with clickhouse.session() as client:
        ensure_schema(client)  # a dry run may come before the first load on this target
        pace = read_pace(client)
    if pace is None:
        return None
    rows_by_date: dict[dt.date, int] = {}
    for size in sizes:
        if size.export is not None:
            day = size.planned.partition_date
            rows_by_date[day] = rows_by_date.get(day, 0) + size.export.num_rows
    ramp_dates = newest_first(rows_by_date)[: load.ramp_up_days]
    ramp_rows = sum(rows_by_date[d] for d in ramp_dates)
    rest_rows = sum(rows_by_date.values()) - ramp_rows
    seconds = pace.seconds(rest_rows, alone_rows=ramp_rows, limit=limit)
    parallel = min(pace.parallel, limit) if limit else pace.parallel
    return Estimate(pace.rows_per_second, pace.measured_days, seconds, parallel)
