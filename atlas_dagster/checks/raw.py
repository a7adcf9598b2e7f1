"""Raw reconciliation: log_completed, rows_reconcile and schema_conformance for one tenant-day."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.checks.export_window import ExportState, window_states
from atlas_dagster.checks.results import CheckOutcome
from atlas_dagster.domains import Domain
from atlas_dagster.loading.day_load import count_day
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import query_rows
from atlas_dagster.tenants import Tenant

RAW_CHECK_NAMES = ("log_completed", "rows_reconcile", "schema_conformance")
RAW_CHECK_DESCRIPTIONS = {
    "log_completed": "backfill_log says completed for this tenant-day (read with FINAL; right "
    "after a load, the row that load wrote inside the day's exclusion)",
    "rows_reconcile": "rows_loaded in backfill_log = distinct events in the raw table = rows in "
    "the day's Parquet files (from their footers), less duplicate event_ids the load counted once",
    "schema_conformance": "the day's export meets the contract: schema, types and footer "
    "statistics before the INSERT, and every row's rules (tenant, UTC day, event type, ids, "
    "required values, money) inside ClickHouse",
}


def read_log_row(client: Client, tenant: Tenant, domain: Domain, day: dt.date) -> dict[str, Any]:
    parameters = {
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "domain": domain.name,
        "partition_date": day,
    }
    rows = query_rows(client, sql.query("log_row"), parameters)
    return rows[0] if rows else {}


def log_completed(log_row: dict[str, Any]) -> CheckOutcome:
    status = log_row.get("status", "missing")
    metadata = {
        "status": status,
        "attempt": log_row.get("attempt", 0),
        "run_id": log_row.get("run_id", ""),
        "updated_at": log_row.get("updated_at", ""),
    }
    if status == "completed":
        return CheckOutcome("log_completed", True, "backfill_log says completed", metadata)
    reason = log_row.get("error_message") or "no backfill_log row for this day"
    metadata["error_message"] = reason
    return CheckOutcome("log_completed", False, f"backfill_log says {status}: {reason}", metadata)


def rows_reconcile(
    log_row: dict[str, Any], raw_events: int, parquet_rows: int | None
) -> CheckOutcome:
    logged = int(log_row.get("rows_loaded", 0))
    duplicates = int(log_row.get("duplicate_rows", 0))
    metadata = {
        "rows_loaded (backfill_log)": logged,
        "distinct events (raw table)": raw_events,
        "rows (Parquet footers)": -1 if parquet_rows is None else parquet_rows,
        "duplicate event_id rows (counted once)": duplicates,
    }
    if log_row.get("status") != "completed":
        return CheckOutcome("rows_reconcile", False, "the day is not loaded", metadata)
    if parquet_rows is None:
        return CheckOutcome("rows_reconcile", False, "the export's files cannot be read", metadata)
    problems = []
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


def outcomes(log_row: dict[str, Any], raw_events: int, export: ExportState) -> list[CheckOutcome]:
    """The three checks of one day, from its log row, its raw table count and its export."""
    return [
        log_completed(log_row),
        rows_reconcile(log_row, raw_events, export.rows),
        schema_conformance(export.error, export.files),
    ]


def day_outcomes(
    client: Client,
    tenant: Tenant,
    domain: Domain,
    day: dt.date,
    export: ExportState,
    *,
    raw_events: int | None = None,
    log_row: dict[str, Any] | None = None,
) -> list[CheckOutcome]:
    """The three checks, given what was already read of the export (footer rows, validation)
    and, right after a load in the same session, the raw table's count it just took and the
    log row it just wrote (re-reading it with FINAL cost 5-10 ms a day on chDB and could only
    find that row: the load still holds the day's exclusion)."""
    if log_row is None:
        log_row = read_log_row(client, tenant, domain, day)
    if raw_events is None:
        raw_events = count_day(client, domain, tenant, day)
    return outcomes(log_row, raw_events, export)


def session_outcomes(
    clickhouse: ClickHouseResource,
    tenant: Tenant,
    domain: Domain,
    day: dt.date,
    export: ExportState,
) -> list[CheckOutcome]:
    with clickhouse.session() as client:
        return day_outcomes(client, tenant, domain, day, export)


def window_outcomes(
    clickhouse: ClickHouseResource, tenant: Tenant, domain: Domain, days: list[dt.date]
) -> Iterator[tuple[dt.date, list[CheckOutcome]]]:
    """The three checks without loading, for days of one tenant and domain: the log and the raw
    table are read once for the window (two queries instead of two per day, 36 ms a day on
    chDB), the exports in bulk (export_window.py: one listing, one validation of the footers, one
    row-rule query per chunk of days instead of one of each per day)."""
    parameters = {
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "domain": domain.name,
        "first_day": min(days),
        "last_day": max(days),
    }
    with clickhouse.session() as client:
        log_rows = {
            row.pop("partition_date"): row
            for row in query_rows(client, sql.query("log_rows_window"), parameters)
        }
        counts = query_rows(client, sql.query("count_days", raw_table=domain.raw_table), parameters)
        events = {row["partition_date"]: int(row["events"]) for row in counts}
        states = window_states(client, clickhouse, tenant, domain, days)
    for day in days:
        yield day, outcomes(log_rows.get(day, {}), events.get(day, 0), states[day])
