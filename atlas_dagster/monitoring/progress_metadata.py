"""Dagster metadata of a tenant's backfill: days per domain and time left (counted by
monitoring/progress.py), and a rows-per-day chart (Markdown)."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client
from dagster import MetadataValue

from atlas_dagster.core.days import days_between
from atlas_dagster.monitoring.pace import Pace, combined, read_paces
from atlas_dagster.monitoring.progress import DomainCount, count_progress, tenant_window
from atlas_dagster.monitoring.status import tenant_days
from atlas_dagster.tenants import Tenant

# Dagster has no plot metadata type; Markdown renders in the UI, and a code block keeps the
# one-character-per-bucket chart aligned.
LEVELS = "▁▂▃▄▅▆▇█"
EMPTY_DAY = "_"  # loaded, zero rows: worth seeing, iGaming days are rarely empty
NOT_LOADED = "·"
PARTLY_LOADED = "░"
FAILED = "×"
CHART_WIDTH = 90  # characters per domain; longer windows put several days in one character


@dataclass(frozen=True)
class DayState:
    status: str
    rows: int


@dataclass(frozen=True)
class DomainProgress:
    """One domain's days as the chart draws them (the counts are progress.py's)."""

    domain: str
    days: dict[dt.date, DayState]
    window: list[dt.date]


def domain_progress(
    client: Client, tenant: Tenant, first: dt.date, last: dt.date
) -> list[DomainProgress]:
    states: dict[str, dict[dt.date, DayState]] = {domain: {} for domain in tenant.domains}
    for row in tenant_days(client, tenant, first, last):
        if row["domain"] in states:
            states[row["domain"]][row["partition_date"]] = DayState(
                row["status"], int(row["rows_loaded"])
            )
    progress = []
    for domain in tenant.domains:  # each domain within its own dates, if it has some
        own_first, own_last = tenant.window(domain)
        window = days_between(max(first, own_first), min(last, own_last))
        inside = set(window)
        days = {day: state for day, state in states[domain].items() if day in inside}
        progress.append(DomainProgress(domain, days, window))
    return progress


def progress_table(counts: list[DomainCount]) -> str:
    lines = [
        "| domain | days done | failed | running | missing | rows loaded |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for c in counts:
        lines.append(
            f"| {c.domain} | {c.done} | {c.failed} | {c.running} | {c.missing} | "
            f"{c.rows_loaded:,} |"
        )
    return "\n".join(lines)


def _bucket_char(states: list[DayState | None], peak: float) -> str:
    if any(s is not None and s.status == "failed" for s in states):
        return FAILED
    done = [s for s in states if s is not None and s.status == "completed"]
    if not done:
        return NOT_LOADED
    if len(done) < len(states):
        return PARTLY_LOADED
    mean = sum(s.rows for s in done) / len(done)
    if mean == 0:
        return EMPTY_DAY
    return LEVELS[max(0, math.ceil(mean / peak * len(LEVELS)) - 1)]


def chart_line(progress: DomainProgress, width: int = CHART_WIDTH) -> tuple[str, int]:
    """One character per bucket of days, scaled to this domain's busiest bucket (rows/day)."""
    span = max(1, math.ceil(len(progress.window) / width))
    buckets = [
        [progress.days.get(day) for day in progress.window[i : i + span]]
        for i in range(0, len(progress.window), span)
    ]
    means = [
        sum(s.rows for s in bucket if s and s.status == "completed") / len(bucket)
        for bucket in buckets
    ]
    peak = max(means, default=0) or 1
    return "".join(_bucket_char(bucket, peak) for bucket in buckets), span


def rows_chart(progress: list[DomainProgress]) -> str:
    if not progress:
        return "(the tenant lists no domain)"
    first, last = progress[0].window[0], progress[0].window[-1]
    name_width = max(len(p.domain) for p in progress)
    lines, span = [], 1
    for p in progress:
        line, span = chart_line(p)
        peak = max((s.rows for s in p.days.values() if s.status == "completed"), default=0)
        lines.append(f"{p.domain.ljust(name_width)} {line}  busiest day {peak:,} rows")
    legend = (
        f"{first} → {last}, 1 character = {span} day(s). {LEVELS[0]}…{LEVELS[-1]} rows per "
        f"day (scaled per domain), {EMPTY_DAY} loaded with 0 rows, {PARTLY_LOADED} partly "
        f"loaded, {NOT_LOADED} not loaded, {FAILED} failed"
    )
    return "```\n" + "\n".join(lines) + "\n```\n\n" + legend


def progress_metadata(
    client: Client,
    tenant: Tenant,
    today: dt.date | None = None,
    limit: int | None = None,
    paces: Mapping[str, Pace | None] | None = None,
) -> dict[str, MetadataValue]:
    """The tenant's backfill over its whole window, for a raw asset's materialization, with the
    time left at the measured pace (pace.time_left), at most `limit` loads at once. `paces`:
    each domain's, when the caller has read them already (a run reads them for all its
    tenants at once)."""
    window = tenant_window(tenant, today)
    if window is None:
        note = f"{tenant.key}: no day of its window ({tenant.start_date} on) has ended yet"
        return {"backfill_progress": MetadataValue.md(note)}
    found = count_progress(client, [tenant], today)
    counts = [found[(tenant.key, d)] for d in tenant.domains if (tenant.key, d) in found]
    progress = domain_progress(client, tenant, *window)
    return {
        "backfill_progress": MetadataValue.md(
            f"**{tenant.key}** {window[0]} → {window[1]}\n\n" + progress_table(counts)
        ),
        "backfill_rows_per_day": MetadataValue.md(rows_chart(progress)),
        "backfill_days_done": MetadataValue.int(sum(c.done for c in counts)),
        "backfill_days_left": MetadataValue.int(sum(c.days_left for c in counts)),
        "backfill_time_left": MetadataValue.text(
            _time_left(counts, limit, paces or read_paces(client, tenant.domains))
        ),
    }


def _time_left(
    counts: list[DomainCount], limit: int | None, paces: Mapping[str, Pace | None]
) -> str:
    """Each domain's days left at its own measured pace, summed (as `status` and the client
    report count them)."""
    if limit == 0:
        return "unknown while the pool atlas_insert is stopped (set to 0)"
    seconds = [c.time_left(paces.get(c.domain), limit) for c in counts]
    if any(s is None for s in seconds):
        return "unknown until each domain has loaded a day"
    total = sum(s for s in seconds if s is not None)
    measured = combined([p for c in counts if (p := paces.get(c.domain)) is not None])
    if measured is None:  # nothing left in any domain
        return f"{total / 60:.1f} min"
    at_once = min(measured.parallel, limit or measured.parallel)
    return f"{total / 60:.1f} min (at the pace measured on recent loads, {at_once:.1f} at once)"
