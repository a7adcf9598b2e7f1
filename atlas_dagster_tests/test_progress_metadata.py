"""progress_metadata: the per-domain table and rows-per-day chart a raw asset attaches, and the
one progress count (monitoring/progress.py) it shares with `status` and the client report."""

import datetime as dt

import pytest
from dagster import MaterializeResult, asset, instance_for_test, materialize

from atlas_dagster.monitoring.pace import read_pace
from atlas_dagster.monitoring.progress_metadata import DayState, DomainProgress, chart_line
from atlas_dagster.monitoring.progress_metadata import progress_metadata as build_metadata
from atlas_dagster.monitoring.status import with_time_left
from atlas_dagster.reporting.collect import collect_reports
from atlas_dagster_tests.backfill_log_rows import insert_log_rows, log_entry, utc_now

TODAY = dt.datetime.now(dt.UTC).date()


def test_table_and_chart_show_each_domains_days(clickhouse, make_tenant) -> None:
    days = [TODAY - dt.timedelta(days=7 - i) for i in range(5)]
    tenant = make_tenant(("user", "casino"), start=days[0], end=days[-1])
    insert_log_rows(
        clickhouse,
        [
            log_entry(tenant, "user", days[0], "completed", rows_loaded=1000),
            log_entry(tenant, "user", days[1], "completed", rows_loaded=500),
            log_entry(tenant, "user", days[2], "failed", error_message="boom"),
            log_entry(tenant, "user", days[3], "running", run_id="r"),
            log_entry(tenant, "casino", days[0], "completed", rows_loaded=0),
            # Outside the window and another domain: neither is counted.
            log_entry(tenant, "user", days[0] - dt.timedelta(days=1), "completed", rows_loaded=7),
            log_entry(tenant, "sportsbook", days[0], "completed", rows_loaded=7),
        ],
    )
    with clickhouse.session() as client:
        metadata = build_metadata(client, tenant)

    table = metadata["backfill_progress"].value
    assert f"**{tenant.key}** {days[0]} → {days[-1]}" in table
    assert "| user | 2 | 1 | 1 | 1 | 1,500 |" in table
    assert "| casino | 1 | 0 | 0 | 4 | 0 |" in table
    chart = metadata["backfill_rows_per_day"].value
    assert "user   █▄×··  busiest day 1,000 rows" in chart
    assert "casino _····  busiest day 0 rows" in chart
    assert "1 character = 1 day(s)" in chart
    assert metadata["backfill_days_done"].value == 3
    assert metadata["backfill_days_left"].value == 2 * 5 - 3


def test_status_metadata_and_report_give_one_count_and_one_time_left(
    clickhouse, make_tenant
) -> None:
    """The raw run's metadata, `status` and the client report count a tenant's days through one
    count and one time-left computation: the same days left and the same seconds at the same
    pool limit; a day outside the window and a neighbour's days count in none of them."""
    days = [TODAY - dt.timedelta(days=6 - i) for i in range(5)]
    tenant = make_tenant(("user",), start=days[0], end=days[-1])
    neighbour = make_tenant(("user",), start=days[0], end=days[-1])
    t0 = utc_now() - dt.timedelta(minutes=10)

    def loaded(who, day: dt.date, rows: int, offset: int) -> dict:
        start = t0 + dt.timedelta(seconds=offset)
        return log_entry(
            who, "user", day, "completed", rows_loaded=rows, source_rows=rows,
            started_at=start, updated_at=start + dt.timedelta(seconds=4),
        )  # fmt: skip

    insert_log_rows(
        clickhouse,
        [
            loaded(tenant, days[0], 2_000, 0),
            loaded(tenant, days[1], 1_000, 0),
            log_entry(tenant, "user", days[2], "failed", error_message="boom"),
            loaded(tenant, days[0] - dt.timedelta(days=1), 99_999, 10),  # outside the window
            loaded(neighbour, days[0], 50_000, 10),
        ],
    )
    status_row = {"organization_id": tenant.organization_id, "brand_id": tenant.brand_id}
    with clickhouse.session() as client:
        metadata = build_metadata(client, tenant, limit=2)
        [row] = with_time_left(client, [tenant, neighbour], [status_row | {"domain": "user"}], 2)
        pace = read_pace(client, "user")
    [report] = collect_reports(clickhouse, [tenant], limit=2)
    [summary] = report.domains

    assert pace is not None
    expected = pace.seconds(3 * 1_500, limit=2)  # 3 days left of the 2 done's mean rows
    assert metadata["backfill_days_left"].value == row["days_left"] == 3
    assert "| user | 2 | 1 | 0 | 2 | 3,000 |" in metadata["backfill_progress"].value
    assert (summary.done, summary.failed, summary.rows) == (2, 1, 3_000)
    assert (summary.first_day, summary.last_day) == (days[0], days[1])
    assert row["time_left_seconds"] == round(expected, 1)
    assert summary.eta_seconds == pytest.approx(expected)
    assert metadata["backfill_time_left"].value.startswith(f"{expected / 60:.1f} min")


def test_long_windows_are_bucketed_to_the_chart_width() -> None:
    window = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(200)]
    days = {day: DayState("completed", 10) for day in window[:150]}
    days[window[4]] = DayState("failed", 0)
    days.pop(window[10])
    line, span = chart_line(DomainProgress("user", days, window), width=90)
    assert (span, len(line)) == (3, 67)  # ceil(200 / 90) days per character
    assert line[1] == "×" and line[3] == "░" and line[0] == "█"
    assert line[50:] == "·" * 17


def test_metadata_is_accepted_on_a_real_materialization(clickhouse, make_tenant) -> None:
    tenant = make_tenant(
        ("user",), start=TODAY - dt.timedelta(days=3), end=TODAY - dt.timedelta(days=1)
    )
    insert_log_rows(clickhouse, [log_entry(tenant, "user", tenant.start_date, "completed")])

    @asset
    def progress_probe() -> MaterializeResult:
        with clickhouse.session() as client:
            return MaterializeResult(metadata=build_metadata(client, tenant))

    with instance_for_test() as instance:
        assert materialize([progress_probe], instance=instance).success
        event = instance.get_latest_materialization_event(progress_probe.key)
        stored = event.asset_materialization.metadata
    assert stored["backfill_progress"].value.count("| user | 1 | 0 | 0 | 2 |") == 1
    assert type(stored["backfill_rows_per_day"]).__name__ == "MarkdownMetadataValue"
