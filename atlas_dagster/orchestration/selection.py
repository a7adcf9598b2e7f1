"""Which days of a window a launch loads: every day, the incomplete ones (never loaded, left
running, failed, or completed but no longer matching the raw table), or only the missing, failed
or re-delivered ones. One rule, read from backfill_log FINAL, the raw table and the export's
listing, for the CLI's plan and for the run that carries SELECT_TAG, so that a run relaunched
after a crash loads what its plan would, and never a day that completed since."""

from __future__ import annotations

import datetime as dt
import enum

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.checks.changes import scan_tenant
from atlas_dagster.domains import Domain
from atlas_dagster.exports.layout import ExportSource
from atlas_dagster.resources.connection import query_rows
from atlas_dagster.tenants import Tenant


class Selection(enum.StrEnum):
    ALL = "all"  # every day, completed ones reloaded (a reprocess)
    INCOMPLETE = "incomplete"  # missing + failed: every day not completed as it stands
    MISSING = "missing"  # never loaded, or left running
    FAILED = "failed"  # logged failed, or completed with other rows than the log says
    CHANGED = "changed"  # completed, and the export's files changed since


# What `backfill` and `load` take without a flag: a second launch of the same window finishes
# what the first left, and reloads nothing that completed (Airflow's reprocess semantics).
DEFAULT_SELECTION = Selection.INCOMPLETE

DayKey = tuple[str, dt.date]  # (domain name, partition date)


def parse(value: str | None) -> Selection:
    """The tag's value; absent means every day (a launch from the UI asked for exactly that)."""
    if not value:
        return Selection.ALL
    try:
        return Selection(value)
    except ValueError as exc:
        known = ", ".join(s.value for s in Selection)
        raise ValueError(f"unknown day selection {value!r} (one of {known})") from exc


def day_states(
    client: Client, tenant: Tenant, domain: Domain, first: dt.date, last: dt.date
) -> dict[dt.date, dict]:
    """Each logged day's state in backfill_log FINAL and its distinct events in the raw table."""
    parameters = {
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "domain": domain.name,
        "start_date": first,
        "end_date": last,
    }
    query = sql.query("day_states", raw_table=domain.raw_table)
    return {row["partition_date"]: row for row in query_rows(client, query, parameters)}


def reason(state: dict | None, selection: Selection, changed: str | None = None) -> str | None:
    """Why a day with this logged state is selected, or None to leave it as it is."""
    if selection is Selection.ALL:
        return "all"
    if selection is Selection.CHANGED:
        return f"changed: {changed}" if changed else None
    if state is None or state["status"] == "running":
        return "missing" if selection in (Selection.MISSING, Selection.INCOMPLETE) else None
    if selection is Selection.MISSING:
        return None
    if state["status"] == "failed":
        return "failed"
    if state["raw_events"] != state["rows_loaded"]:
        return f"raw table holds {state['raw_events']} events, backfill_log {state['rows_loaded']}"
    return None


def select_days(
    client: Client,
    tenant: Tenant,
    domains: list[Domain],
    days: list[dt.date],
    selection: Selection,
    source: ExportSource | None = None,
) -> dict[DayKey, str]:
    """(domain, day) → why it loads, for the tenant's `days` of `domains` that `selection` takes:
    one state query per domain over the days' span, and for CHANGED one listing pass per domain
    (checks/changes.py), never a file's contents."""
    if not days:
        return {}
    first, last = min(days), max(days)
    wanted = set(days)
    if selection is Selection.ALL:
        return {(d.name, day): "all" for d in domains for day in wanted}
    if selection is Selection.CHANGED:
        scan = scan_tenant(client, tenant, [d.name for d in domains], first, last, source=source)
        return {
            (c.domain, c.partition_date): f"changed: {c.reason}"
            for c in scan.changed
            if c.partition_date in wanted
        }
    selected = {}
    for domain in domains:
        states = day_states(client, tenant, domain, first, last)
        for day in wanted:
            why = reason(states.get(day), selection)
            if why is not None:
                selected[(domain.name, day)] = why
    return selected
