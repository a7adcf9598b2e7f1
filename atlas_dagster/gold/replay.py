"""Replays one gold tenant-day inside ClickHouse and reconciles it with raw computed another way."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.gold.tables import GoldTable, identifier
from atlas_dagster.resources.connection import query_rows, run_command
from atlas_dagster.tenants import Tenant

Number = int | Decimal


@dataclass(frozen=True)
class DayReplay:
    rows_written: int  # fresh rows of the day
    rows_deleted: int  # tombstones for keys the day no longer has
    totals: dict[str, Number]  # each metric summed over the fresh rows
    computed_at: dt.datetime
    duration_seconds: float
    query_id: str


@dataclass(frozen=True)
class Reconciliation:
    gold: dict[str, Number]
    raw: dict[str, Number]
    replayed: bool  # False: gold holds no row at all (not even a tombstone) for the day

    @property
    def mismatches(self) -> list[str]:
        return [name for name, value in self.gold.items() if value != self.raw[name]]

    @property
    def passed(self) -> bool:
        return not self.mismatches


def window_start(table: GoldTable, day: dt.date, lookback_days: int) -> dt.date:
    """First day whose opens a windowed table counts; the day itself for the others."""
    return day - dt.timedelta(days=lookback_days - 1) if table.windowed else day


def _midnight(day: dt.date) -> dt.datetime:
    # Naive UTC, bound as DateTime64(6, 'UTC'), as backfill_log does.
    return dt.datetime.combine(day, dt.time())


def day_parameters(
    table: GoldTable, tenant: Tenant, day: dt.date, lookback_days: int
) -> dict[str, object]:
    start = window_start(table, day, lookback_days)
    return {
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "day": day,
        "day_start": _midnight(day),
        "day_end": _midnight(day + dt.timedelta(days=1)),  # half-open: midnight is the next day
        "window_start": start,
        "window_start_at": _midnight(start),
        "lookback_days": lookback_days,
    }


def _written(
    client: Client, table: GoldTable, parameters: dict[str, object]
) -> tuple[int, int, dict[str, Number]]:
    totals = ", ".join(
        f"sumIf({identifier(m)}, is_deleted = 0) AS {identifier(m)}" for m in table.metrics
    )
    text = sql.query("gold_day_written", gold_table=identifier(table.name), metric_totals=totals)
    [row] = query_rows(client, text, parameters)
    return row.pop("rows_written"), row.pop("rows_deleted"), row


def replay_day(
    client: Client, table: GoldTable, tenant: Tenant, day: dt.date, lookback_days: int
) -> DayReplay:
    """One INSERT ... SELECT: the day's fresh rows plus tombstones; no row passes through Python."""
    started = time.monotonic()
    # Every row of this INSERT shares computed_at: the version that supersedes the earlier rows.
    computed_at = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    query_id = f"atlas-gold-{uuid.uuid4()}"
    parameters = day_parameters(table, tenant, day, lookback_days) | {"computed_at": computed_at}
    run_command(
        client,
        sql.query(table.replay_query, **table.source_tables()),
        parameters,
        settings={"query_id": query_id},
    )
    rows_written, rows_deleted, totals = _written(client, table, parameters)
    return DayReplay(
        rows_written,
        rows_deleted,
        totals,
        computed_at,
        time.monotonic() - started,
        query_id,
    )


def reconcile_day(
    client: Client, table: GoldTable, tenant: Tenant, day: dt.date, lookback_days: int
) -> Reconciliation:
    """Gold's counts and sums for the tenant-day next to the same figures computed from raw."""
    text = sql.query(table.reconcile_query, **table.source_tables())
    parameters = day_parameters(table, tenant, day, lookback_days)
    [row] = query_rows(client, text, parameters)
    gold = {k.removeprefix("gold_"): v for k, v in row.items() if k.startswith("gold_")}
    raw = {k.removeprefix("raw_"): v for k, v in row.items() if k.startswith("raw_")}
    if gold.keys() != raw.keys():
        raise ValueError(f"{table.reconcile_query}: gold {sorted(gold)} vs raw {sorted(raw)}")
    replayed = sql.query("gold_day_replayed", gold_table=identifier(table.name))
    return Reconciliation(gold, raw, bool(int(run_command(client, replayed, parameters))))
