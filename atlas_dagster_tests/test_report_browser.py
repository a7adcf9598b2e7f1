"""The client's progress page as a client opens it: three years written by `atlas-dagster report`,
rendered offline in Debian's headless Chromium, its numbers read off the page and checked against
backfill_log. The screenshot goes to atlas_dagster_tests/artifacts/ (ignored by git)."""

import datetime as dt
import random
import re
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from atlas_dagster.cli.main import main
from atlas_dagster.domains import DOMAINS
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import query_rows
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.tenants import Tenant
from atlas_dagster.validation.rows import Violation, describe
from atlas_dagster_tests.backfill_log_rows import insert_log_rows, log_entry
from atlas_dagster_tests.test_ui_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS
from testkit.dagster_stack import write_tenants

pytestmark = pytest.mark.browser

TODAY = dt.datetime.now(dt.UTC).date()
YEARS_OF_DAYS = 3 * 365
# The page must show three years without scrolling sideways on a laptop screen.
VIEWPORT = {"width": 1440, "height": 900}
BROKEN = [
    ("amount", "is negative", "-12.5000"),
    ("event_timestamp", "is outside the partition's UTC day", "2021-03-02 23:59:59.000000"),
    ("event_type", "is not an event type of this domain", "bonus"),
]


@pytest.fixture
def clickhouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClickHouseResource:
    """A fresh embedded ClickHouse for each test, also what `atlas-dagster report` opens."""
    dsn = f"chdb://{tmp_path / 'clickhouse'}"
    monkeypatch.setenv("ATLAS_CLICKHOUSE_DSN", dsn)
    return ClickHouseResource(dsn=dsn)


def _seed(clickhouse, tenant: Tenant) -> None:
    """Three years: mostly loaded, a failed stretch, a month never exported, days not tried,
    one day loading; gold replayed for the oldest two years."""
    rng = random.Random(tenant.key)
    first = tenant.start_date
    entries = []
    for domain in tenant.domains:
        for offset in range(YEARS_OF_DAYS):
            day = first + dt.timedelta(days=offset)
            if 400 <= offset < 430 and domain == "sportsbook":
                folder = (
                    f"{tenant.source}/{domain}/organization_id={tenant.organization_id}/"
                    f"brand_id={tenant.brand_id}/year={day:%Y}/month={day:%m}/day={day:%d}"
                )
                message = f"ExportError: no Parquet files for the day at {folder}/"
                entries.append(log_entry(tenant, domain, day, "failed", error_message=message))
            elif rng.random() < 0.012 or (domain == "casino" and 700 <= offset < 706):
                column, broken, value = rng.choice(BROKEN)
                file = f"{tenant.source}/{domain}/organization_id={tenant.organization_id}/" + (
                    f"brand_id={tenant.brand_id}/year={day:%Y}/month={day:%m}/day={day:%d}/"
                    "part-0003.parquet"
                )
                violation = Violation(file, column, broken, rng.randrange(1, 40),
                                      rng.randrange(0, 90_000), value)  # fmt: skip
                message = f"RowContractError: {describe(day, DOMAINS[domain], [violation])}"
                entries.append(log_entry(tenant, domain, day, "failed", error_message=message))
            elif offset >= YEARS_OF_DAYS - 40 and rng.random() < 0.6:
                continue  # the newest weeks: not tried yet
            elif offset == YEARS_OF_DAYS - 2:
                entries.append(log_entry(tenant, domain, day, "running"))
            else:
                rows = rng.randrange(20_000, 90_000)
                entries.append(
                    log_entry(tenant, domain, day, "completed", rows_loaded=rows, source_rows=rows)
                )
    insert_log_rows(clickhouse, entries)
    with clickhouse.session() as client:
        ensure_schema(client)
        for table in GOLD_TABLES.values():
            client.insert(
                f"atlas.{table.name}",
                [
                    [tenant.organization_id, tenant.brand_id, first + dt.timedelta(days=i)]
                    for i in range(2 * 365)
                ],
                column_names=["organization_id", "brand_id", "day"],
            )


def _expected(clickhouse, tenant: Tenant) -> dict[str, dict]:
    with clickhouse.session() as client:
        rows = query_rows(
            client,
            "SELECT domain, countIf(status = 'completed') AS done, "
            "countIf(status = 'failed' AND error_message NOT LIKE 'ExportError: no Parquet%') "
            "AS failed, countIf(status = 'failed' AND error_message LIKE 'ExportError: no Parq%')"
            " AS not_exported, sumIf(rows_loaded, status = 'completed') AS rows "
            "FROM atlas.backfill_log FINAL WHERE organization_id = {o:String} "
            "AND brand_id = {b:String} GROUP BY domain",
            {"o": tenant.organization_id, "b": tenant.brand_id},
        )
    return {row["domain"]: row for row in rows}


def _newest_failure(clickhouse, tenant: Tenant) -> dict:
    with clickhouse.session() as client:
        [row] = query_rows(
            client,
            "SELECT domain, partition_date AS day, error_message AS error "
            "FROM atlas.backfill_log FINAL WHERE organization_id = {o:String} "
            "AND brand_id = {b:String} AND status = 'failed' "
            "AND error_message LIKE 'RowContractError%' "
            "ORDER BY partition_date DESC, domain LIMIT 1",
            {"o": tenant.organization_id, "b": tenant.brand_id},
        )
    return row


def _number(text: str) -> int:
    return int(re.sub(r"[^0-9]", "", text))


def test_the_client_reads_three_years_in_a_browser(
    clickhouse, make_tenant, tmp_path, monkeypatch, capsys
) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/ensure-system-deps installs it")
    start = TODAY - dt.timedelta(days=YEARS_OF_DAYS)
    tenant = make_tenant(tuple(DOMAINS), start=start, end=TODAY - dt.timedelta(days=1))
    neighbour = make_tenant(tuple(DOMAINS), start=start, end=TODAY - dt.timedelta(days=1))
    _seed(clickhouse, tenant)
    _seed(clickhouse, neighbour)
    monkeypatch.setenv(
        "ATLAS_TENANTS_FILE", str(write_tenants(tmp_path / "t.yaml", [tenant, neighbour]))
    )
    out = tmp_path / "report"
    argv = ["report", "--org", tenant.organization_id, "--brand", "main", "--out", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    expected = _expected(clickhouse, tenant)

    outside: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport=VIEWPORT)
            # Offline: anything but the file itself would be an external asset.
            page.route(
                "**/*",
                lambda route: (
                    route.continue_()
                    if route.request.url.startswith("file://")
                    else (outside.append(route.request.url), route.abort())
                ),
            )
            page.goto((out / "progress.html").as_uri())
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "client_report_3_years.png"), full_page=True)
            page.screenshot(path=str(ARTIFACTS / "client_report_first_screen.png"))

            assert outside == []
            heading = page.locator("h1").inner_text()
            assert tenant.organization_id in heading and neighbour.organization_id not in heading
            due = YEARS_OF_DAYS
            for domain, log in expected.items():
                row = page.locator(f"#domains tr[data-domain='{domain}']")
                shown = {
                    name: _number(row.locator(f"[data-field='{name}']").inner_text())
                    for name in ("done", "failed", "not_exported", "expected", "rows")
                }
                assert shown == {
                    "done": log["done"],
                    "failed": log["failed"],
                    "not_exported": log["not_exported"],
                    "expected": due,
                    "rows": log["rows"],
                }
                cells = page.locator(f"#calendar g[data-row='{domain}'] rect")
                assert cells.count() == due
                assert (
                    page.locator(f"#calendar g[data-row='{domain}'] rect.C").count() == log["done"]
                )
                assert (
                    page.locator(f"#calendar g[data-row='{domain}'] rect.F").count()
                    == log["failed"]
                )
            done = sum(log["done"] for log in expected.values())
            percent = page.locator("[data-card='percent'] b").inner_text()
            assert percent == f"{100 * done / (due * len(expected)):.1f}%"
            # Gold: every table holds the oldest two years, so exactly those days are replayed.
            assert page.locator("#calendar g[data-row='gold'] rect.G").count() == 2 * 365
            # Three years on one screen: the calendar fits the viewport's width.
            box = page.locator("#calendar").bounding_box()
            assert box is not None and box["x"] + box["width"] <= VIEWPORT["width"]
            # The failures name the day, file, column, first bad row and value, newest first.
            newest = _newest_failure(clickhouse, tenant)
            row = page.locator("#failures tr[data-failure]").first
            assert row.get_attribute("data-failure") == f"{newest['domain']}|{newest['day']}"
            assert f"/day={newest['day']:%d}/part-0003.parquet" in row.locator(".file").inner_text()
            assert f"row {_number(row.locator('.row').inner_text())} (0-based)" in newest["error"]
            assert f"with value '{row.locator('.value').inner_text()}'" in newest["error"]
            # What to change: every kind of problem, and as many days as backfill_log failed.
            advice = page.locator("#advice").inner_text()
            assert all(f"Column {column} {broken}." in advice for column, broken, _ in BROKEN)
            days = page.locator("#advice td.n").all_inner_texts()
            assert sum(_number(d) for d in days) == sum(log["failed"] for log in expected.values())
            assert "sportsbook" in page.locator("#not-exported").inner_text()
            assert tenant.source not in page.content()
        finally:
            browser.close()
