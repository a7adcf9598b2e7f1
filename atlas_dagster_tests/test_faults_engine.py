"""Fault injection: the embedded engine cannot be opened, or another process holds it.

A failed open must release the project's lock (the next unit in the same process must not wait
on its own leaked lock), fail promptly with a clear message, and a later load must succeed; a
wait for the engine is bounded and shows in the CLI and the Dagster run log, naming the holder.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, materialize

from atlas_dagster.assets.raw import raw_assets
from atlas_dagster.domains import get_domain
from atlas_dagster.partitions import partitions_for
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.embedded_engine import (
    EngineBusyError,
    EngineOpenError,
    acquire_file_lock,
    release_file_lock,
)
from atlas_dagster_tests.conftest import log_row
from atlas_dagster_tests.faults_support import (
    LOCK_HOLDER,
    RAW_CHDB_HOLDER,
    Lines,
    cli,
    fault_site,
    python,
)
from testkit.bulk_exports import write_bulk_day
from testkit.load_support import load_day, run_resources

pytestmark = pytest.mark.slow  # real engine processes, kills and servers

DAY = dt.date(2026, 11, 6)
ROWS = 5_000
CASINO = get_domain("casino")
# How long a run may take to show its wait for the engine: a bound against a hang.
WAIT_SECONDS = 120.0


def _raw_rows(clickhouse: ClickHouseResource, org: str) -> int:
    with clickhouse.session() as client:
        return int(
            client.command(
                "SELECT count() FROM atlas.tbt_raw_events_casino FINAL "
                "WHERE organization_id = {o:String} AND event_date = {d:Date}",
                parameters={"o": org, "d": DAY},
            )
        )


def _lock_is_free(data_dir: Path) -> bool:
    """A new handle in this very process takes the lock at once: nothing of ours leaked it."""
    handle = acquire_file_lock(data_dir, 0.5)
    release_file_lock(handle)
    return True


@pytest.mark.parametrize("kept_open", [False, True], ids=["session", "kept-engine"])
def test_a_data_dir_held_outside_our_lock_fails_promptly_then_a_later_load_succeeds(
    tmp_path: Path, kept_open: bool
) -> None:
    site = fault_site(tmp_path, f"held{int(kept_open)}", DAY, DAY)
    write_bulk_day(site.tenant, "casino", DAY, ROWS)
    clickhouse = ClickHouseResource(dsn=site.dsn, lock_wait_seconds=30)
    log = Lines()
    clickhouse._log = log  # what Dagster's setup_for_execution sets to the run's log
    holder = python(RAW_CHDB_HOLDER, str(site.data_dir), env=site.env)
    holder.wait_for(lambda line: line == "held")
    with clickhouse.kept_open() if kept_open else contextlib.nullcontext():
        with pytest.raises(EngineOpenError) as raised:
            load_day(clickhouse, site.tenant, CASINO, DAY, "run-1")
        message = str(raised.value)
        assert f"process {holder.pid} holds the data directory outside" in message, message
        assert "Stack trace" not in message and len(message.splitlines()) == 1
        # Promptly: it never waited (a wait reports at once), so not lock_wait_seconds on our
        # own leaked lock either.
        assert log.waits() == [], log.lines
        assert _lock_is_free(site.data_dir)
        holder.kill()
        # A later load in the same process (and the same kept engine) succeeds.
        load = load_day(clickhouse, site.tenant, CASINO, DAY, "run-2")
    assert load.rows_loaded == ROWS == _raw_rows(clickhouse, site.tenant.organization_id)
    assert log_row(clickhouse, site.tenant, "casino", DAY)["status"] == "completed"


def test_an_uncreatable_data_dir_is_one_clear_error_and_releases_the_lock(tmp_path: Path) -> None:
    data_dir = tmp_path / "not-a-dir"
    data_dir.write_text("a file where the data directory should be")
    clickhouse = ClickHouseResource(dsn=f"chdb://{data_dir}", lock_wait_seconds=30)
    log = Lines()
    clickhouse._log = log
    for _ in range(2):  # the second attempt would wait on a leaked lock
        with pytest.raises(EngineOpenError, match=f"embedded ClickHouse at {data_dir} could not"):
            with clickhouse.session():
                pass
        assert log.waits() == [], log.lines  # it failed without waiting for any lock
    assert _lock_is_free(data_dir)
    data_dir.unlink()
    with clickhouse.session() as client:
        assert client.command("SELECT 1") == 1


def test_an_engine_wait_names_the_holder_and_is_bounded(tmp_path: Path) -> None:
    site = fault_site(tmp_path, "busy", DAY, DAY)
    holder = python(LOCK_HOLDER, str(site.data_dir), str(site.work), env=site.env)
    holder.wait_for(lambda line: line == "held")
    log = Lines()
    clickhouse = ClickHouseResource(dsn=site.dsn, lock_wait_seconds=2)
    clickhouse._log = log  # what Dagster's setup_for_execution sets to the run's log
    with pytest.raises(EngineBusyError) as raised:
        with clickhouse.session():
            pass
    holder.kill()
    for text in (str(raised.value), log.lines[0]):
        assert f":{holder.pid}:" in text and "(Dagster run holder)" in text, text
    assert "gave up waiting for embedded ClickHouse" in str(raised.value)
    assert "waited 0s of at most 2s" in log.lines[0]


def test_an_engine_wait_shows_in_the_cli_and_in_the_dagster_run_log(tmp_path: Path) -> None:
    site = fault_site(tmp_path, "shown", DAY, DAY)
    write_bulk_day(site.tenant, "casino", DAY, ROWS)
    # The CLI: `init-db` waits for a holder that lets go after a few seconds.
    holder = python(LOCK_HOLDER, str(site.data_dir), str(site.work), env=site.env)
    holder.wait_for(lambda line: line == "held")
    init = cli("init-db", env=site.env)
    init.wait_for(lambda line: "waiting for embedded ClickHouse" in line)
    holder.kill()  # it lets go once the wait has shown
    assert init.finish(timeout=120) == 0, init.output
    assert f":{holder.pid}:" in init.output and "(Dagster run holder)" in init.output
    assert "got embedded ClickHouse" in init.output

    # The Dagster run log: a run of the raw asset waits for another holder, then loads.
    holder = python(LOCK_HOLDER, str(site.data_dir), str(site.work / "second"), env=site.env)
    holder.wait_for(lambda line: line == "held")
    with DagsterInstance.from_config(str(site.home)) as instance:
        # The holder lets go once the run's log shows its wait (was: after 4 s, which a loaded
        # machine could spend before the run even asked for the engine).
        killer = threading.Thread(target=_kill_once_a_run_waits, args=(instance, holder))
        killer.start()
        tenants = [site.tenant]
        result = materialize(
            raw_assets(tenants, partitions_for(tenants)),
            selection=["tbt_raw_events_casino"],
            instance=instance,
            resources=run_resources(ClickHouseResource(dsn=site.dsn, lock_wait_seconds=60)),
            partition_key=f"{DAY}|{site.tenant.key}",
        )
        killer.join(timeout=WAIT_SECONDS)
        messages = [e.user_message for e in instance.all_logs(result.run_id)]
    assert result.success
    waits = [m for m in messages if "waiting for embedded ClickHouse" in m]
    assert waits and f":{holder.pid}:" in waits[0] and "(Dagster run holder)" in waits[0]
    assert any("got embedded ClickHouse" in m for m in messages)


def _kill_once_a_run_waits(instance: DagsterInstance, holder) -> None:
    """Polls the instance's runs' logs until one says it waits for the engine, then kills the
    holder; at the bound it kills it anyway (the run then loads, and the test fails on its log
    showing no wait)."""
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while time.monotonic() < deadline:
            for run in instance.get_runs():
                if any(
                    "waiting for embedded ClickHouse" in (e.user_message or "")
                    for e in instance.all_logs(run.run_id)
                ):
                    return
            time.sleep(0.05)
    finally:
        holder.kill()
