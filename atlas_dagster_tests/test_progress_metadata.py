"""progress_metadata: the per-domain table and rows-per-day chart a raw asset attaches."""

import datetime as dt

from dagster import MaterializeResult, asset, instance_for_test, materialize

from atlas_dagster.monitoring.progress_metadata import DayState, DomainProgress, chart_line
from atlas_dagster.monitoring.progress_metadata import progress_metadata as build_metadata
from atlas_dagster_tests.backfill_log_rows import insert_log_rows, log_entry

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
