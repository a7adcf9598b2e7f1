"""The measured pace (monitoring/pace.py): rows per second per load and how many loads ran at
once, read from backfill_log's recent completed loads; idle gaps between backfills do not count
as slowness, and the time left is capped by the pool's limit."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path

from atlas_dagster.monitoring.pace import Pace, concurrency
from atlas_dagster_tests.faults_support import python

T0 = dt.datetime(2026, 12, 1, 12, 0, 0)


def _span(start: float, end: float) -> tuple[dt.datetime, dt.datetime]:
    return T0 + dt.timedelta(seconds=start), T0 + dt.timedelta(seconds=end)


def test_concurrency_is_what_the_loads_saw() -> None:
    assert concurrency([_span(0, 10)] * 3) == 3.0
    assert concurrency([_span(0, 10), _span(10, 20), _span(20, 30)]) == 1.0
    # A day apart: two backfills, one load at a time each, whatever the gap.
    assert concurrency([_span(0, 10), _span(86_400, 86_410)]) == 1.0
    # Two at once, then one alone: 2, 2 and 1 loads at the three midpoints.
    assert concurrency([_span(0, 10), _span(0, 10), _span(20, 30)]) == 5 / 3


def test_time_left_at_the_pace_and_the_pools_limit() -> None:
    pace = Pace(rows_per_second=1_000.0, parallel=3.0, measured_days=10)
    assert pace.seconds(30_000) == 10.0
    assert pace.seconds(30_000, limit=1) == 30.0  # the pool was lowered since: one at a time
    assert pace.seconds(30_000, alone_rows=5_000) == 15.0  # ramp-up rows one at a time
    assert Pace(1_000.0, 1.0, 1).seconds(30_000, limit=4) == 30.0  # never above the measured


READ = textwrap.dedent(
    """
    import datetime as dt, sys
    from atlas_dagster.monitoring.pace import read_pace, read_paces
    from atlas_dagster.resources.clickhouse import ClickHouseResource
    from atlas_dagster.tenants import Tenant
    from atlas_dagster_tests.backfill_log_rows import insert_log_rows, log_entry

    clickhouse = ClickHouseResource(dsn=sys.argv[1])
    tenant = Tenant("pace", "main", "file:///nowhere", dt.date(2026, 11, 1), None, ("casino",))
    t0 = dt.datetime(2026, 12, 1, 12)
    rows = []
    # Two loads of 10 s side by side, then one alone: 30,000 rows over 30 load-seconds.
    for i, (start, end) in enumerate([(0, 10), (0, 10), (60, 70)]):
        rows.append(log_entry(
            tenant, "casino", dt.date(2026, 11, 1) + dt.timedelta(days=i), "completed",
            rows_loaded=10_000, source_rows=10_000,
            started_at=t0 + dt.timedelta(seconds=start), updated_at=t0 + dt.timedelta(seconds=end),
        ))
    # A failed load is not a pace.
    rows.append(log_entry(tenant, "casino", dt.date(2026, 11, 5), "failed", source_rows=9))
    insert_log_rows(clickhouse, rows)
    with clickhouse.session() as client:
        print(read_pace(client, "casino"), read_pace(client, "sportsbook"), read_pace(client))
        paces = read_paces(client, ["casino", "sportsbook"])
        print(paces == {"casino": read_pace(client, "casino"), "sportsbook": None})
    """
)


def test_the_pace_is_read_from_the_logs_completed_loads(tmp_path: Path) -> None:
    """On a fresh engine of its own (a process per data directory): only these loads count."""
    reader = python(READ, f"chdb://{tmp_path / 'clickhouse'}")
    assert reader.finish(timeout=120) == 0, reader.output
    pace = Pace(1_000.0, 5 / 3, 3)
    assert reader.output.strip().splitlines()[-2:] == [f"{pace} None {pace}", "True"]
