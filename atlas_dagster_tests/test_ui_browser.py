"""The real Dagster UI in headless Chromium: launch a backfill from a raw asset's dialog and watch
its days load newest first. Screenshots go to atlas_dagster_tests/artifacts/ (ignored by git)."""

from __future__ import annotations

import datetime as dt
import random
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from atlas_dagster.cli.demo_data import GENERATORS, write_day
from atlas_dagster.tenants import load_tenants
from testkit.dagster_stack import run_dagster_dev, write_tenants

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).parent / "artifacts"
FIRST, LAST = dt.date(2026, 11, 1), dt.date(2026, 11, 7)
WAIT_SECONDS = 180


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/ensure-system-deps installs it")
    work = tmp_path_factory.mktemp("ui")
    tenants_file = write_tenants(
        work / "tenants.yaml",
        [
            {
                "organization_id": "browser",
                "brand_id": "main",
                "source": f"file://{work / 'exports'}",
                "start_date": FIRST.isoformat(),
                "end_date": LAST.isoformat(),
                "domains": ["casino"],
            }
        ],
    )
    [tenant] = load_tenants(tenants_file)
    for offset in range((LAST - FIRST).days + 1):
        day = FIRST + dt.timedelta(days=offset)
        write_day(
            tenant, "casino", day, GENERATORS["casino"][0](random.Random(offset), tenant, day, 200)
        )
    with run_dagster_dev(work, tenants_file) as stack, sync_playwright() as playwright:
        # Debian's Chromium with a new, empty profile; nothing is downloaded.
        browser = playwright.chromium.launch_persistent_context(
            user_data_dir=str(work / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1500, "height": 1100},
        )
        try:
            yield stack, browser.new_page()
        finally:
            browser.close()


def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def _dismiss_first_visit_prompt(page: Page) -> None:
    """A new instance greets its first visitor with a newsletter prompt over the page."""
    skip = page.get_by_role("button", name="Skip")
    try:
        skip.wait_for(timeout=10_000)
    except PlaywrightTimeout:
        return
    skip.click()
    skip.wait_for(state="hidden")


def _launch_backfill_from_dialog(page: Page, url: str) -> str:
    page.goto(f"{url}/assets/tbt_raw_events_casino?view=partitions")
    page.get_by_role("button", name="Materialize…").wait_for()
    _dismiss_first_visit_prompt(page)
    page.get_by_role("button", name="Materialize…").click()
    dialog = page.get_by_role("dialog")
    dates = dialog.get_by_placeholder(re.compile("^ex: "))
    dates.fill(f"[{FIRST}...{LAST}]")
    dates.press("Enter")
    dialog.get_by_role("button", name="All").nth(1).click()  # every tenant (the one)
    dialog.get_by_text("7 partitions").wait_for()
    _shot(page, "01-materialize-dialog")
    dialog.get_by_role("button", name="Launch backfill").click()
    created = page.get_by_text(re.compile(r"Created backfill \w+"))
    created.wait_for()
    return re.search(r"Created backfill (\w+)", created.inner_text()).group(1)


def _wait_for_backfill_page(page: Page, url: str, backfill_id: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        page.goto(f"{url}/runs/b/{backfill_id}?tab=runs")
        page.get_by_text("Partition selection").wait_for()
        body = page.locator("body").inner_text()
        if re.search(r"Status\s+Succeeded", body):
            return
        assert not re.search(r"Status\s+(Failed|Canceled)", body), body[:2000]
        assert time.monotonic() < deadline, f"backfill {backfill_id} still running: {body[:1500]}"
        time.sleep(3)


def _run_log_lines(page: Page, url: str, run_id: str, text: str, pattern: str) -> list[str]:
    page.goto(f"{url}/runs/{run_id}")
    page.get_by_placeholder(re.compile("[Ff]ilter")).first.fill(text)
    page.get_by_text(re.compile(pattern)).first.wait_for()
    return re.findall(pattern, page.locator("body").inner_text())


def test_backfill_launched_from_the_dialog_loads_newest_day_first(ui) -> None:
    stack, page = ui
    backfill_id = _launch_backfill_from_dialog(page, stack.url)
    _wait_for_backfill_page(page, stack.url, backfill_id)
    _shot(page, "02-backfill-succeeded")
    run_link = page.locator("a", has_text=re.compile(r"^[0-9a-f]{8}$")).first
    run_id_prefix = run_link.inner_text()
    run_link.click()
    page.wait_for_url(re.compile(f"/runs/{run_id_prefix}"))
    run_id = page.url.rsplit("/runs/", 1)[1].split("?")[0]

    # Days that start within one tick share a line (monitoring/run_log.py), items joined by "; ".
    started = _run_log_lines(
        page,
        stack.url,
        run_id,
        "INSERT started",
        r"(?:INSERT started: |; )\S+ (\d{4}-\d\d-\d\d)\|\S+ \(worker",
    )
    _shot(page, "03-run-insert-order")
    finished = _run_log_lines(
        page,
        stack.url,
        run_id,
        "rows from",
        r"tbt_raw_events_casino (\d{4}-\d\d-\d\d)\|\S+: \d+ rows",
    )
    days = [(FIRST + dt.timedelta(days=i)).isoformat() for i in range((LAST - FIRST).days + 1)]
    assert started == sorted(days, reverse=True)
    # The ramp-up days run one at a time, so they also finish newest first; the rest may overlap.
    assert finished[:3] == sorted(days, reverse=True)[:3]
    assert sorted(finished) == days


def test_the_ui_shows_lineage_from_raw_to_gold(ui) -> None:
    stack, page = ui
    page.goto(f"{stack.url}/assets/gold_ggr_daily?view=lineage")
    page.get_by_text("tbt_raw_events_sportsbook").first.wait_for()
    body = page.locator("body").inner_text()
    _shot(page, "04-lineage-raw-to-gold")
    assert "tbt_raw_events_casino" in body and "gold_ggr_daily" in body
