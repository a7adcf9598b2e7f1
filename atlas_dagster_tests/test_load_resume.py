"""`atlas-dagster load` killed in the middle of a window (SIGKILL: no cleanup at all) and started
again with the same arguments loads only what the killed one did not complete: the day that was
running and the days never started, newest first; no day that completed before the kill is
loaded twice, and every day ends with exactly its export's rows. `--all-days` reloads all."""

from __future__ import annotations

import datetime as dt
import re
import time
from pathlib import Path

import pytest

from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster_tests.conftest import log_row
from atlas_dagster_tests.faults_support import cli, fault_site
from testkit.bulk_exports import write_bulk_day

pytestmark = pytest.mark.slow  # real load processes, one killed

DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(6)]
ROWS = 300_000  # about half a second per INSERT here: the kill lands mid-window
# A bound against a hang, never a measure of speed.
WAIT_SECONDS = 300


def _load(site, *extra: str):
    tenant = site.tenant
    return cli(
        "load", "--org", tenant.organization_id, "--brand", tenant.brand_id, *extra, env=site.env
    )


def _days(output: str, what: str) -> list[str]:
    """The days of the run log's `what` lines ('INSERT started', 'loaded'), in order; a line
    may name a few days."""
    return [
        day
        for line in output.splitlines()
        if f" - {what}: " in line
        for day in re.findall(r"tbt_raw_events_casino (\d{4}-\d{2}-\d{2})\|", line)
    ]


def _started(output: str) -> list[str]:
    return _days(output, "INSERT started")


def test_a_killed_load_started_again_loads_only_what_did_not_complete(tmp_path: Path) -> None:
    site = fault_site(tmp_path, "resumed", DAYS[0], DAYS[-1])
    for day in DAYS:
        write_bulk_day(site.tenant, "casino", day, ROWS)
    first = _load(site)
    deadline = time.monotonic() + WAIT_SECONDS
    # Killed once its first day has loaded: the next one's INSERT is in flight or about to be.
    while not _days(first.output, "loaded"):
        assert first.popen.poll() is None, first.output
        assert time.monotonic() < deadline, first.output
        time.sleep(0.05)
    first.kill()

    clickhouse = ClickHouseResource(dsn=site.dsn)
    before = {day: log_row(clickhouse, site.tenant, "casino", day) for day in DAYS}
    completed = {day for day, row in before.items() if row and row["status"] == "completed"}
    assert completed and completed != set(DAYS), before

    second = _load(site)
    assert second.finish(timeout=WAIT_SECONDS) == 0, second.output
    rest = len(DAYS) - len(completed)
    # The plan's range spans the incomplete days only; the run selects them again.
    assert f"day selection 'incomplete': loading {rest} of the range's" in second.output
    # Newest first among what was left, and nothing completed before the kill started again.
    started = [dt.date.fromisoformat(d) for d in _started(second.output)]
    assert started == sorted(set(DAYS) - completed, reverse=True), second.output
    after = {day: log_row(clickhouse, site.tenant, "casino", day) for day in DAYS}
    for day in DAYS:
        assert after[day]["status"] == "completed" and after[day]["rows_loaded"] == ROWS, day
        if day in completed:
            assert after[day]["attempt"] == before[day]["attempt"] == 1, day
    assert _raw_rows(clickhouse, site.tenant) == ROWS * len(DAYS)

    third = _load(site)  # nothing left: nothing loaded
    assert third.finish(timeout=WAIT_SECONDS) == 0, third.output
    assert "nothing to load for resumed.main" in third.output
    everything = _load(site, "--all-days")  # a reprocess, asked for
    assert everything.finish(timeout=WAIT_SECONDS) == 0, everything.output
    assert len(_started(everything.output)) == len(DAYS)
    assert _raw_rows(clickhouse, site.tenant) == ROWS * len(DAYS)


def _raw_rows(clickhouse: ClickHouseResource, tenant) -> int:
    with clickhouse.session() as client:
        return int(
            client.command(
                "SELECT count() FROM atlas.tbt_raw_events_casino FINAL "
                "WHERE organization_id = {o:String}",
                parameters={"o": tenant.organization_id},
            )
        )
