"""How fast loads go on this target and how long what is left takes: the one time-left
computation of `backfill --dry-run` and `--wait`, the raw run's progress metadata, `status` and
the client report.

The pace is measured from backfill_log's recent completed loads: rows per second per load and
how many loads actually ran at once (each load's view of it, so idle gaps between backfills do
not count). What is left counts at most the pool's live limit at once (the callers pass
orchestration/insert_limit.py's `live_limit`): a pool lowered since the loads were measured
slows the estimate, a raised one cannot speed it past what was measured."""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.resources.connection import query_rows

# Enough loads to smooth one slow day out, recent enough to follow a change of target or pool.
RECENT_LOADS = 500


@dataclass(frozen=True)
class Pace:
    rows_per_second: float  # per load (validation, INSERT, checks), as the loads ran
    parallel: float  # loads running at once, as the measured loads saw it (>= 1)
    measured_days: int

    def seconds(self, rows: float, alone_rows: float = 0.0, limit: int | None = None) -> float:
        """Time to load `rows` at this pace, plus `alone_rows` loaded one at a time (a tenant's
        ramp-up days), with at most `limit` loads at once (the pool's limit now)."""
        parallel = max(1.0, min(self.parallel, limit) if limit else self.parallel)
        return (alone_rows + rows / parallel) / self.rows_per_second


def time_left(
    pace: Pace | None, days_left: int, days_done: int, rows_done: float, limit: int | None
) -> float | None:
    """Seconds to load `days_left` days of the completed days' mean rows (`rows_done` over
    `days_done`) at `pace`, at most `limit` loads at once: 0 when nothing is left; None when it
    cannot be known (no load measured, no day of these completed, or the pool stopped: 0)."""
    if days_left <= 0:
        return 0.0
    if pace is None or days_done <= 0 or limit == 0:
        return None
    return pace.seconds(days_left * rows_done / days_done, limit=limit)


def combined(paces: list[Pace]) -> Pace | None:
    """Several domains' paces as one, each weighted by the loads it was measured on."""
    days = sum(p.measured_days for p in paces)
    if not days:
        return None
    rate = sum(p.rows_per_second * p.measured_days for p in paces) / days
    parallel = sum(p.parallel * p.measured_days for p in paces) / days
    return Pace(rate, parallel, days)


def read_pace(client: Client, domain: str = "") -> Pace | None:
    """The pace of `domain`'s recent loads ('' for all domains); None before any load."""
    rows = query_rows(client, sql.query("load_pace"), {"domain": domain, "recent": RECENT_LOADS})
    return _pace(rows)


def read_paces(client: Client, domains: Iterable[str]) -> dict[str, Pace | None]:
    """Each domain's pace, in one read (a query per domain cost 8 ms each, measured on a
    100 tenants × 3 years log)."""
    wanted = sorted(set(domains))
    rows = query_rows(client, sql.query("load_paces"), {"domains": wanted, "recent": RECENT_LOADS})
    by_domain: dict[str, list[dict]] = {domain: [] for domain in wanted}
    for row in rows:
        by_domain[row["domain"]].append(row)
    return {domain: _pace(found) for domain, found in by_domain.items()}


def _pace(rows: list[dict]) -> Pace | None:
    spans = [(r["started_at"], r["updated_at"]) for r in rows]
    seconds = sum((end - start).total_seconds() for start, end in spans)
    if not rows or seconds <= 0:
        return None
    total = sum(int(r["source_rows"]) for r in rows)
    return Pace(total / seconds, concurrency(spans), len(rows))


def concurrency(spans: list[tuple[dt.datetime, dt.datetime]]) -> float:
    """The mean number of loads running at each load's midpoint, itself included."""
    starts = sorted(start for start, _ in spans)
    ends = sorted(end for _, end in spans)
    running = [
        bisect.bisect_right(starts, mid) - bisect.bisect_right(ends, mid)
        for mid in (start + (end - start) / 2 for start, end in spans)
    ]
    return max(1.0, sum(running) / len(running))
