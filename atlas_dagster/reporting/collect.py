"""The client progress report's figures, for one tenant or a fleet, from a few grouped queries."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.checks.changes import ChangeScan, scan_tenant
from atlas_dagster.gold.tables import GOLD_TABLES, GoldTable, identifier
from atlas_dagster.monitoring.pace import Pace, combined, read_paces
from atlas_dagster.monitoring.progress import DomainCount, count_progress
from atlas_dagster.reporting.advice import ClientFailure, Scrubber, client_failures
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import dsn_password, query_rows
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.settings import DEFAULT_PARALLEL_INSERTS
from atlas_dagster.tenants import Tenant

# One calendar cell's state, as a letter (the JSON/CSV spell them out, see STATE_NAMES).
COMPLETED, FAILED, LOADING, MISSING, NOT_EXPORTED = "C", "F", "L", "M", "N"
# A completed day with no events (a complete export without the day's folder), and a day outside
# a domain's own dates (a sportsbook launched after the casino): neither is owed anything.
EMPTY, OUTSIDE = "E", "O"
# A completed day whose export was delivered again with other files since its load: it holds the
# earlier delivery's rows until it is reloaded (checks/changes.py).
REDELIVERED = "R"
DONE = (COMPLETED, EMPTY, REDELIVERED)
STATE_NAMES = {
    COMPLETED: "completed",
    EMPTY: "no events",
    OUTSIDE: "outside the domain's dates",
    FAILED: "failed",
    LOADING: "loading",
    MISSING: "missing",
    NOT_EXPORTED: "not exported yet",
    REDELIVERED: "re-delivered, reload pending",
}
# The states of sql/queries/report/days.sql as cells.
LETTERS = {
    "completed": COMPLETED,
    "empty": EMPTY,
    "failed": FAILED,
    "running": LOADING,
    "not_exported": NOT_EXPORTED,
}
# Gold cells: every in-scope gold table replayed the day, some did, none did.
GOLD_REPLAYED, GOLD_PARTIAL, GOLD_NONE = "G", "P", "-"
GOLD_STATE_NAMES = {
    GOLD_REPLAYED: "replayed",
    GOLD_PARTIAL: "partly replayed",
    GOLD_NONE: "not yet",
}
# Failed days listed with their diagnosis per tenant, newest first (all are counted).
FAILURES_PER_TENANT = 500
EPOCH = dt.date(1970, 1, 1)

TenantKey = tuple[str, str]


@dataclass(frozen=True)
class DomainSummary:
    domain: str
    expected_days: int  # the window's days up to yesterday: what can be exported by now
    done: int
    failed: int
    loading: int
    not_exported: int  # due days whose export folder held no file when they were tried
    rows: int
    first_day: dt.date | None
    last_day: dt.date | None
    eta_seconds: float | None  # loading time left at the measured pace; None: unknown

    @property
    def missing(self) -> int:
        left = self.expected_days - self.done - self.failed - self.loading - self.not_exported
        return max(0, left)

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.expected_days if self.expected_days else 100.0


@dataclass(frozen=True)
class GoldSummary:
    table: str
    days_replayed: int
    days_waiting: int  # raw complete in every source domain, gold not written yet


@dataclass
class TenantReport:
    organization_id: str
    brand_id: str
    generated_at: dt.datetime
    first_day: dt.date
    last_day: dt.date  # the window's last day, which may still be ahead
    expected_last: dt.date | None  # yesterday or the window's end; None: nothing due yet
    domains: list[DomainSummary] = field(default_factory=list)
    calendar: dict[str, str] = field(default_factory=dict)  # domain → one letter per day
    gold_calendar: str = ""
    gold: list[GoldSummary] = field(default_factory=list)
    failures: list[ClientFailure] = field(default_factory=list)
    # Loaded days delivered again since: (domain, day, what changed), newest first.
    redelivered: list[tuple[str, dt.date, str]] = field(default_factory=list)
    pace: Pace | None = None  # this tenant's domains' measured pace, weighted by their days

    @property
    def key(self) -> str:
        return f"{self.organization_id}.{self.brand_id}"

    def days(self) -> list[dt.date]:
        return [self.first_day + dt.timedelta(days=i) for i in range(len(self.gold_calendar))]

    @property
    def expected_days(self) -> int:
        return sum(d.expected_days for d in self.domains)

    @property
    def done_days(self) -> int:
        return sum(d.done for d in self.domains)

    @property
    def percent(self) -> float:
        total = self.expected_days
        return 100.0 * self.done_days / total if total else 100.0

    @property
    def eta_seconds(self) -> float | None:
        """All domains' loading time left (each already spread over the parallel INSERTs)."""
        etas = [d.eta_seconds for d in self.domains]
        if any(e is None for e in etas):
            return None
        return sum(e for e in etas if e is not None)


@dataclass(frozen=True)
class FleetRows:
    """The grouped queries' answers for a set of tenants, keyed by (organization, brand)."""

    counts: dict[tuple[str, str], DomainCount]  # (tenant key, domain): monitoring/progress.py
    days: dict[TenantKey, dict[str, dict[str, list[int]]]]
    failures: dict[TenantKey, list[dict]]
    gold: dict[str, dict[TenantKey, set[int]]]
    pace: dict[str, Pace | None]


def _tenant_parameters(tenants: Sequence[Tenant], last_day: dt.date) -> dict[str, object]:
    return {
        "organization_ids": [t.organization_id for t in tenants],
        "brand_ids": [t.brand_id for t in tenants],
        "last_day": last_day,
    }


def read_fleet(client: Client, tenants: Sequence[Tenant], today: dt.date) -> FleetRows:
    """At most 8 queries whatever the number of tenants: the progress count (progress.py, as
    `status` and the raw run's metadata count), calendar days and failures (grouped by tenant
    and domain), one per gold table, and each domain's pace measured on this target's recent
    loads (pace.read_paces, as `status` and the raw run read it)."""
    parameters = _tenant_parameters(tenants, today - dt.timedelta(days=1))
    counts = count_progress(client, tenants, today)
    days: dict[TenantKey, dict[str, dict[str, list[int]]]] = {}
    for row in query_rows(client, sql.query("report/days"), parameters):
        by_domain = days.setdefault((row["organization_id"], row["brand_id"]), {})
        by_domain.setdefault(row["domain"], {})[row["state"]] = row["days"]
    failures: dict[TenantKey, list[dict]] = {}
    failure_parameters = parameters | {"per_tenant": FAILURES_PER_TENANT}
    for row in query_rows(client, sql.query("report/failures"), failure_parameters):
        failures.setdefault((row["organization_id"], row["brand_id"]), []).append(row)
    gold: dict[str, dict[TenantKey, set[int]]] = {}
    for table in GOLD_TABLES.values():
        text = sql.query("report/gold_days", gold_table=identifier(table.name))
        gold[table.name] = {
            (row["organization_id"], row["brand_id"]): set(row["days"])
            for row in query_rows(client, text, parameters)
        }
    domains = sorted({d for t in tenants for d in t.domains})
    pace = read_paces(client, domains)
    return FleetRows(counts, days, failures, gold, pace)


def _day_number(day: dt.date) -> int:
    return (day - EPOCH).days


def _cells(states: dict[str, list[int]], first: dt.date, length: int, due: int) -> str:
    """One letter per day of the window: days not due yet are NOT_EXPORTED, the others MISSING
    until the log says otherwise."""
    cells = [MISSING if i < due else NOT_EXPORTED for i in range(length)]
    base = _day_number(first)
    for state, numbers in states.items():
        letter = LETTERS.get(state)
        for number in numbers if letter else ():
            offset = number - base
            if 0 <= offset < length:
                cells[offset] = letter
    return "".join(cells)


def _outside_dates(cells: str, tenant: Tenant, domain: str, first: dt.date) -> str:
    """The cells before the domain's own start or after its own end marked OUTSIDE."""
    own_first, own_last = tenant.window(domain)
    return "".join(
        OUTSIDE if not own_first <= first + dt.timedelta(days=i) <= own_last else cell
        for i, cell in enumerate(cells)
    )


def _redelivered(
    cells: str, redelivered: list[tuple[str, dt.date, str]], domain: str, first: dt.date
) -> str:
    """Completed cells of days delivered again since their load marked REDELIVERED."""
    offsets = {(day - first).days for name, day, _ in redelivered if name == domain}
    return "".join(
        REDELIVERED if i in offsets and cell in (COMPLETED, EMPTY) else cell
        for i, cell in enumerate(cells)
    )


def _domain_summary(
    domain: str,
    cells: str,
    due: int,
    count: DomainCount | None,
    pace: Pace | None,
    limit: int,
) -> DomainSummary:
    """Day counts from the calendar's cells (the first `due` are the days due); rows, the first
    and last loaded day and the time left from the domain's progress count (None: the domain's
    own dates have not begun)."""
    return DomainSummary(
        domain=domain,
        expected_days=due - cells[:due].count(OUTSIDE),
        done=sum(cells.count(state) for state in DONE),
        failed=cells.count(FAILED),
        loading=cells.count(LOADING),
        not_exported=cells[:due].count(NOT_EXPORTED),
        rows=count.rows_loaded if count else 0,
        first_day=count.first_done if count else None,
        last_day=count.last_done if count else None,
        eta_seconds=count.time_left(pace, limit) if count else 0.0,
    )


def _gold_tables(tenant: Tenant) -> list[GoldTable]:
    return [t for t in GOLD_TABLES.values() if any(d in tenant.domains for d in t.sources)]


def _gold(
    tenant: Tenant, rows: FleetRows, calendar: dict[str, str], first: dt.date, length: int
) -> tuple[str, list[GoldSummary]]:
    base = _day_number(first)
    key = (tenant.organization_id, tenant.brand_id)
    tables = _gold_tables(tenant)
    replayed = [
        {n - base for n in rows.gold.get(t.name, {}).get(key, set()) if 0 <= n - base < length}
        for t in tables
    ]
    summaries = []
    for table, days in zip(tables, replayed, strict=True):
        sources = [calendar[d] for d in table.sources if d in calendar]
        complete = {i for i in range(length) if sources and all(s[i] in DONE for s in sources)}
        # A day whose sources had no event has nothing to aggregate: its replay writes no row,
        # and it counts as replayed once its raw days are done.
        days |= {i for i in complete if all(s[i] in (EMPTY, OUTSIDE) for s in sources)}
        summaries.append(GoldSummary(table.name, len(days), len(complete - days)))
    cells = []
    for i in range(length):
        count = sum(1 for days in replayed if i in days)
        full = bool(replayed) and count == len(replayed)
        cells.append(GOLD_REPLAYED if full else GOLD_PARTIAL if count else GOLD_NONE)
    return "".join(cells), summaries


def build_report(
    tenant: Tenant,
    rows: FleetRows,
    today: dt.date,
    limit: int,
    known_secrets: tuple[str | None, ...] = (),
    changes: ChangeScan | None = None,
) -> TenantReport:
    """One tenant's report from the fleet's rows: only its own key is ever looked up.
    `known_secrets` (the DSN's password) are scrubbed from its texts with the tenant's own;
    `changes`: the tenant's re-delivered days (scan_tenant), marked in the calendar."""
    key = (tenant.organization_id, tenant.brand_id)
    first, last = tenant.start_date, tenant.last_date(today)
    length = (last - first).days + 1
    yesterday = today - dt.timedelta(days=1)
    expected_last = min(last, yesterday) if first <= yesterday else None
    due = (expected_last - first).days + 1 if expected_last else 0
    scrub = Scrubber(tenant, known_secrets)
    failures = [
        failure
        for row in rows.failures.get(key, [])
        for failure in client_failures(tenant, row, scrub)
    ]
    report = TenantReport(
        tenant.organization_id,
        tenant.brand_id,
        dt.datetime.now(dt.UTC).replace(microsecond=0),
        first,
        last,
        expected_last,
        failures=failures,
    )
    report.redelivered = [
        (c.domain, c.partition_date, scrub(c.reason)) for c in (changes.changed if changes else [])
    ]
    for domain in tenant.domains:
        cells = _cells(rows.days.get(key, {}).get(domain, {}), first, length, due)
        cells = _outside_dates(cells, tenant, domain, first)
        cells = _redelivered(cells, report.redelivered, domain, first)
        report.calendar[domain] = cells
        report.domains.append(
            _domain_summary(
                domain,
                cells,
                due,
                rows.counts.get((tenant.key, domain)),
                rows.pace.get(domain),
                limit,
            )
        )
    report.gold_calendar, report.gold = _gold(tenant, rows, report.calendar, first, length)
    report.pace = combined([p for d in tenant.domains if (p := rows.pace.get(d)) is not None])
    return report


def collect_reports(
    clickhouse: ClickHouseResource,
    tenants: Sequence[Tenant],
    today: dt.date | None = None,
    limit: int = DEFAULT_PARALLEL_INSERTS,
) -> list[TenantReport]:
    """Every tenant's report from one read of the fleet (one engine session); the time left is at
    the measured pace, at most `limit` loads at once (the pool's live limit)."""
    today = today or dt.datetime.now(dt.UTC).date()
    if not tenants:
        return []
    with clickhouse.session() as client:
        ensure_schema(client)
        rows = read_fleet(client, tenants, today)
        changes = {t.key: _changes(client, t, today) for t in tenants}
    secrets = (dsn_password(clickhouse.resolved_dsn()),)
    return [build_report(t, rows, today, limit, secrets, changes[t.key]) for t in tenants]


def _changes(client: Client, tenant: Tenant, today: dt.date) -> ChangeScan | None:
    """The tenant's re-delivered days; None (unmarked) when its export cannot be listed: the
    report still says everything else."""
    last = min(tenant.last_date(today), today - dt.timedelta(days=1))
    if last < tenant.start_date:
        return None
    try:
        return scan_tenant(client, tenant, list(tenant.domains), tenant.start_date, last)
    except Exception:
        return None
