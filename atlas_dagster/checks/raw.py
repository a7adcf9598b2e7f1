"""Raw reconciliation: log_completed, rows_reconcile and schema_conformance of tenant-days.

Every check reads what it reconciles, after the load and outside it: backfill_log FINAL (the row
that wins, as the monitoring guide's queries see it), a fresh FINAL count of distinct events in
the raw table, and the export (footer rows, contract and row rules: export_window.py for verify,
the load's own validation right after a load). Nothing the loader holds in memory stands in for
a read. A batch of tenant-days, of any tenants and domains, costs one query for the log rows and
one for the raw counts (UNION ALL over the batch's raw tables).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.checks.export_window import ExportState, window_states
from atlas_dagster.checks.results import CheckOutcome
from atlas_dagster.domains import Domain
from atlas_dagster.exports.fingerprint import changes, decode
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import query_rows
from atlas_dagster.tenants import Tenant

RAW_CHECK_NAMES = ("log_completed", "rows_reconcile", "schema_conformance")
RAW_CHECK_DESCRIPTIONS = {
    "log_completed": "backfill_log says completed for this tenant-day: its current row, read "
    "with FINAL after the load (right after a load, also the row that load wrote: its run and "
    "attempt)",
    "rows_reconcile": "three numbers read apart agree: rows_loaded in backfill_log (FINAL), a "
    "fresh count of distinct events in the raw table (FINAL), and the rows of the day's Parquet "
    "files (their footers), less the duplicate event_ids the load counted once; in verify, the "
    "files listed now are also the ones the load read (its stored fingerprint)",
    "schema_conformance": "the day's export meets the contract: schema, types and footer "
    "statistics before the INSERT, and every row's rules (tenant, UTC day, event type, ids, "
    "required values, money) inside ClickHouse",
}

# (organization_id, brand_id, domain, partition_date): one tenant-day of one domain.
DayKey = tuple[str, str, str, dt.date]


@dataclass(frozen=True)
class LoadIdentity:
    """Which backfill_log row a load wrote: right after it, the row that must win."""

    run_id: str
    attempt: int


@dataclass(frozen=True)
class CheckedDay:
    """A tenant-day to check: what was read of its export, and the load that just completed it
    (None in verify, or when the day failed)."""

    tenant: Tenant
    domain: Domain
    day: dt.date
    export: ExportState
    loaded_by: LoadIdentity | None = None
    # Why a run refused the day (outside the tenant's scope): each check fails saying so.
    refused: str | None = None

    @property
    def key(self) -> DayKey:
        return (self.tenant.organization_id, self.tenant.brand_id, self.domain.name, self.day)


@dataclass(frozen=True)
class Reconciled:
    """What one batch read found: each day's current log row, and its raw table's count."""

    log_rows: dict[DayKey, dict[str, Any]]
    raw_events: dict[DayKey, int]


def read_reconciled(client: Client, days: Sequence[CheckedDay]) -> Reconciled:
    """Two queries for the whole batch: backfill_log FINAL, then every raw table's counts."""
    if not days:
        return Reconciled({}, {})
    return Reconciled(read_log_rows(client, days), count_raw_events(client, days))


def read_log_rows(client: Client, days: Sequence[CheckedDay]) -> dict[DayKey, dict[str, Any]]:
    keys = [d.key for d in days]
    parameters = {
        "organization_ids": [k[0] for k in keys],
        "brand_ids": [k[1] for k in keys],
        "domains": [k[2] for k in keys],
        "days": [k[3] for k in keys],
        "first_day": min(k[3] for k in keys),
        "last_day": max(k[3] for k in keys),
    }
    found = {}
    for row in query_rows(client, sql.query("check_log_rows"), parameters):
        key = (row.pop("organization_id"), row.pop("brand_id"), row.pop("domain"))
        found[(*key, row.pop("partition_date"))] = row
    return found


def count_raw_events(client: Client, days: Sequence[CheckedDay]) -> dict[DayKey, int]:
    """Distinct events per tenant-day in each day's raw table: one SELECT per domain of the
    batch (its table's name is the domain registry's), joined with UNION ALL."""
    by_domain: dict[str, list[CheckedDay]] = {}
    domains: dict[str, Domain] = {}
    for checked in days:
        by_domain.setdefault(checked.domain.name, []).append(checked)
        domains[checked.domain.name] = checked.domain
    branches, parameters = [], {}
    for name, checked in sorted(by_domain.items()):
        branches.append(
            sql.query("check_raw_counts", domain=name, raw_table=domains[name].raw_table)
        )
        parameters |= {
            f"domain_{name}": name,
            f"organization_ids_{name}": [d.tenant.organization_id for d in checked],
            f"brand_ids_{name}": [d.tenant.brand_id for d in checked],
            f"days_{name}": [d.day for d in checked],
            f"first_day_{name}": min(d.day for d in checked),
            f"last_day_{name}": max(d.day for d in checked),
        }
    text = "\nUNION ALL\n".join(f"SELECT * FROM ({branch})" for branch in branches)
    return {
        (r["organization_id"], r["brand_id"], r["domain"], r["partition_date"]): int(r["events"])
        for r in query_rows(client, text, parameters)
    }


def log_completed(log_row: dict[str, Any], loaded_by: LoadIdentity | None = None) -> CheckOutcome:
    status = log_row.get("status", "missing")
    metadata = {
        "status (backfill_log FINAL)": status,
        "attempt": log_row.get("attempt", 0),
        "run_id": log_row.get("run_id", ""),
        "updated_at": log_row.get("updated_at", ""),
    }
    if not log_row:
        return CheckOutcome(
            "log_completed", False, "backfill_log has no row for this day", metadata
        )
    if status != "completed":
        reason = log_row.get("error_message") or (
            f"attempt {log_row.get('attempt')} of run {log_row.get('run_id')}, "
            f"updated at {log_row.get('updated_at')}"
        )
        metadata["error_message"] = log_row.get("error_message", "")
        return CheckOutcome(
            "log_completed", False, f"backfill_log says {status}: {reason}", metadata
        )
    if loaded_by is not None and (
        log_row.get("run_id") != loaded_by.run_id or log_row.get("attempt") != loaded_by.attempt
    ):
        metadata["this load"] = f"attempt {loaded_by.attempt} of run {loaded_by.run_id}"
        return CheckOutcome(
            "log_completed",
            False,
            f"backfill_log's current row is attempt {log_row.get('attempt')} of run "
            f"{log_row.get('run_id')}, not this load's attempt {loaded_by.attempt} of run "
            f"{loaded_by.run_id}: its 'completed' row did not win",
            metadata,
        )
    return CheckOutcome("log_completed", True, "backfill_log says completed", metadata)


def redelivered(log_row: dict[str, Any], export: ExportState) -> str | None:
    """What changed in the export since the load that completed the day (its stored
    fingerprint against the files listed now); None when nothing did, or it cannot be told."""
    stored = decode(str(log_row.get("source_files", "")))
    if stored is None or export.stamps is None or log_row.get("status") != "completed":
        return None
    return changes(stored, export.stamps)


def rows_reconcile(
    log_row: dict[str, Any],
    raw_events: int,
    parquet_rows: int | None,
    changed: str | None = None,
) -> CheckOutcome:
    """`changed`: what redelivered() found: the raw rows are an earlier delivery's."""
    logged = int(log_row.get("rows_loaded", 0))
    duplicates = int(log_row.get("duplicate_rows", 0))
    metadata = {
        "rows_loaded (backfill_log)": logged,
        "distinct events (raw table)": raw_events,
        "rows (Parquet footers)": -1 if parquet_rows is None else parquet_rows,
        "duplicate event_id rows (counted once)": duplicates,
    }
    if log_row.get("status") != "completed":
        return CheckOutcome(
            "rows_reconcile",
            False,
            f"the day is not loaded (the raw table holds {raw_events} distinct events)",
            metadata,
        )
    if parquet_rows is None:
        return CheckOutcome("rows_reconcile", False, "the export's files cannot be read", metadata)
    problems = []
    if changed:
        metadata["changed since loaded"] = changed
        problems.append(
            f"the export changed since the day was loaded ({changed}): the raw rows are the "
            "earlier delivery's; reload it with --only-changed"
        )
    if raw_events != logged:
        problems.append(f"the raw table holds {raw_events} distinct events, the log {logged}")
    if parquet_rows != logged + duplicates:
        problems.append(
            f"the export has {parquet_rows} rows, the log {logged} + {duplicates} duplicates"
        )
    if problems:
        return CheckOutcome("rows_reconcile", False, "; ".join(problems), metadata)
    return CheckOutcome("rows_reconcile", True, f"{logged} events reconcile", metadata)


def schema_conformance(error: str | None, files: int) -> CheckOutcome:
    metadata = {"files": files}
    if error:
        return CheckOutcome("schema_conformance", False, error, metadata | {"error": error})
    return CheckOutcome("schema_conformance", True, "the export matches the contract", metadata)


def outcomes(checked: CheckedDay, reconciled: Reconciled) -> list[CheckOutcome]:
    """The three checks of one day, from the batch's reads."""
    log_row = reconciled.log_rows.get(checked.key, {})
    raw_events = reconciled.raw_events.get(checked.key, 0)
    found = [
        log_completed(log_row, checked.loaded_by),
        rows_reconcile(
            log_row, raw_events, checked.export.rows, redelivered(log_row, checked.export)
        ),
        schema_conformance(checked.export.error, checked.export.files),
    ]
    if checked.refused is None:
        return found
    refusal = f"outside the tenant's scope: {checked.refused}"
    return [
        CheckOutcome(o.check_name, False, refusal, o.metadata | {"read": o.description})
        if o.description != refusal
        else o
        for o in found
    ]


def batch_outcomes(
    client: Client, days: Sequence[CheckedDay]
) -> list[tuple[CheckedDay, list[CheckOutcome]]]:
    """Every day's three checks, the log and raw tables read once for the whole batch."""
    reconciled = read_reconciled(client, days)
    return [(checked, outcomes(checked, reconciled)) for checked in days]


def window_days(
    client: Client,
    clickhouse: ClickHouseResource,
    tenant: Tenant,
    domain: Domain,
    days: list[dt.date],
) -> list[CheckedDay]:
    """Days of one tenant and domain to check without loading: their exports re-read in bulk
    (export_window.py: one listing, one validation of the footers, one row-rule query per chunk
    of days)."""
    states = window_states(client, clickhouse, tenant, domain, days)
    return [CheckedDay(tenant, domain, day, states[day]) for day in days]


def window_outcomes(
    clickhouse: ClickHouseResource, tenant: Tenant, domain: Domain, days: list[dt.date]
) -> Iterator[tuple[dt.date, list[CheckOutcome]]]:
    """The three checks of a window of one tenant and domain, without loading."""
    with clickhouse.session() as client:
        checked = batch_outcomes(client, window_days(client, clickhouse, tenant, domain, days))
    for day_checked, day_outcomes in checked:
        yield day_checked.day, day_outcomes
