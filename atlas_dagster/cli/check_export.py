"""atlas-dagster check-export: a tenant's export against the contract, every row; writes nothing."""

from __future__ import annotations

import argparse
import datetime as dt
from collections import Counter

from atlas_dagster.checks.export_window import ExportState, listed_states
from atlas_dagster.cli.backfill import print_readings, window_arguments
from atlas_dagster.cli.engine import clickhouse_resource
from atlas_dagster.core.days import days_between
from atlas_dagster.domains import Domain
from atlas_dagster.exports.layout import DayExport, ExportSource
from atlas_dagster.orchestration.backfill_plan import resolve_domains, resolve_window
from atlas_dagster.partitions import newest_first
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.settings import current_settings
from atlas_dagster.tenants import load_tenants, tenant_by_key

# Refused days printed per domain; the rest are counted.
SHOWN_REFUSALS = 20


def _verdict(state: ExportState) -> str:
    if state.error is None:
        return "no events" if state.files == 0 else "passes"
    return "not exported yet" if "not exported yet" in state.error else "refused"


def run_check_export(args: argparse.Namespace) -> int:
    """Each domain's days in one listing pass, footers validated once, every row's rules read
    inside ClickHouse (one query per 128 days): exactly what a load would refuse, before any
    INSERT. Exit 1 when a day would not load."""
    tenant = tenant_by_key(
        load_tenants(current_settings().tenants_file), f"{args.org}.{args.brand}"
    )
    domains = resolve_domains(tenant, args.domains.split(",") if args.domains else None)
    first, last = resolve_window(tenant, args.start, args.end)
    print(
        f"check-export {tenant.key} {first}..{last}: every file's schema, footers and rows "
        "against the contract, read inside ClickHouse; nothing is written"
    )
    clickhouse = clickhouse_resource()
    source = ExportSource(tenant)
    exports: list[tuple[Domain, DayExport]] = []
    failing = 0
    with clickhouse.session() as client:
        ensure_schema(client)
        for domain in domains:
            own_first, own_last = tenant.window(domain.name)
            days = days_between(max(first, own_first), min(last, own_last))
            if not days:
                continue
            listed = source.list_window(domain.name, days)
            states = listed_states(client, clickhouse, tenant, domain, listed)
            exports += [(domain, e) for e in listed.values() if isinstance(e, DayExport)]
            failing += _print_domain(domain.name, days, states)
    print_readings(exports)
    return 1 if failing else 0


def _print_domain(name: str, days: list[dt.date], states: dict[dt.date, ExportState]) -> int:
    verdicts = {day: _verdict(states[day]) for day in days}
    counts = Counter(verdicts.values())
    summary = ", ".join(f"{count} {verdict}" for verdict, count in sorted(counts.items()))
    print(f"{name}: {len(days)} day(s): {summary}")
    loads = ("passes", "no events")
    failing = [day for day in newest_first(days) if verdicts[day] not in loads]
    for day in failing[:SHOWN_REFUSALS]:
        error = str(states[day].error).replace("\n", "\n      ")
        print(f"  {day} {verdicts[day]}: {error}")
    if len(failing) > SHOWN_REFUSALS:
        print(f"  … and {len(failing) - SHOWN_REFUSALS} more day(s)")
    return len(failing)


def register(commands: argparse._SubParsersAction) -> None:
    check = commands.add_parser(
        "check-export",
        help="check a tenant's export against the contract (every row, inside ClickHouse) "
        "without loading anything",
    )
    window_arguments(check, selections=False)
    check.set_defaults(run=run_check_export)
