"""Fault injection, server mode (http DSN), against a loopback listener that answers like
ClickHouse (there is no ClickHouse server here; see fake_clickhouse.py): the tenant's S3 keys
never travel in a request URL, and two processes loading the same tenant-day take turns through
the day exclusion held in the Dagster instance's storage, which a killed holder does not keep."""

from __future__ import annotations

import datetime as dt
import os
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance

from atlas_dagster.loading.day_load import insert_day
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.day_exclusion import DayBusyError
from atlas_dagster.tenants import load_tenants
from atlas_dagster_tests.fake_clickhouse import Request, fake_clickhouse, prepared_day
from atlas_dagster_tests.faults_support import Process, python
from testkit.dagster_stack import write_tenants
from testkit.postgres_server import (
    PostgresServer,
    postgres_instance_yaml,
    postgres_server,
)

pytestmark = pytest.mark.slow  # real engine processes, kills and servers

DAY = dt.date(2026, 11, 6)
ROWS = 1234
KEY_ID = "AKIAFAULTSUITE00001"
SECRET = "fault-suite-secret/value+with=signs"
DSN_PASSWORD = "dsn-pass-9431"


def _site(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    tenants_file = write_tenants(
        tmp_path / "tenants.yaml",
        [
            {
                "organization_id": "srv",
                "brand_id": "main",
                "source": "s3://srv-exports/atlas",
                "start_date": DAY.isoformat(),
                "end_date": DAY.isoformat(),
                "domains": ["casino"],
                "s3": {
                    "endpoint_url": "http://127.0.0.1:9",
                    "access_key_id_env": "SRV_KEY_ID",
                    "secret_access_key_env": "SRV_SECRET",
                },
            }
        ],
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    # Create the instance's SQLite schema once: two processes opening a fresh home at the same
    # moment race on CREATE TABLE ("table backfill_tags already exists", seen in CI).
    DagsterInstance.from_config(str(home)).dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATLAS_", "DAGSTER_"))}
    env |= {
        "ATLAS_TENANTS_FILE": str(tenants_file),
        "DAGSTER_HOME": str(home),
        "SRV_KEY_ID": KEY_ID,
        "SRV_SECRET": SECRET,
    }
    return tenants_file, env


def _resource(url: str, instance: DagsterInstance, wait: float = 60) -> ClickHouseResource:
    clickhouse = ClickHouseResource(
        dsn=url.replace("http://", f"http://default:{DSN_PASSWORD}@"), lock_wait_seconds=wait
    )
    clickhouse._instance = instance  # what Dagster's setup_for_execution sets for a run
    return clickhouse


def test_the_tenants_s3_keys_never_travel_in_a_request_url(tmp_path: Path, monkeypatch) -> None:
    tenants_file, env = _site(tmp_path)
    for name in ("SRV_KEY_ID", "SRV_SECRET"):
        monkeypatch.setenv(name, env[name])
    [tenant] = load_tenants(tenants_file)
    with (
        fake_clickhouse(ROWS) as server,
        DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance,
    ):
        load = insert_day(
            _resource(server.url, instance), prepared_day(tenant, "casino", DAY, ROWS), "run-1"
        )
    assert load.rows_loaded == ROWS
    [insert] = server.statements("_events_inbound")
    assert SECRET in insert.body and KEY_ID in insert.body  # sent, in the body
    for request in server.requests:
        for secret in (SECRET, KEY_ID, DSN_PASSWORD):
            assert secret not in request.line, request.line
        assert "param_" not in request.line, request.line
        assert DSN_PASSWORD not in request.body


LOADER = textwrap.dedent(
    """
    import datetime as dt, os, sys
    from dagster import DagsterInstance
    from atlas_dagster.loading.day_load import insert_day
    from atlas_dagster.resources.clickhouse import ClickHouseResource
    from atlas_dagster.tenants import load_tenants
    from atlas_dagster_tests.fake_clickhouse import prepared_day
    url, day, rows = sys.argv[1], dt.date.fromisoformat(sys.argv[2]), int(sys.argv[3])
    [tenant] = load_tenants(__import__("pathlib").Path(os.environ["ATLAS_TENANTS_FILE"]))
    with DagsterInstance.get() as instance:
        clickhouse = ClickHouseResource(dsn=url, lock_wait_seconds=60)
        clickhouse._instance = instance
        print("loading", flush=True)
        prepared = prepared_day(tenant, "casino", day, rows)
        load = insert_day(clickhouse, prepared, f"run-{os.getpid()}")
    print("loaded", load.rows_loaded, flush=True)
    """
)

HOLDER = textwrap.dedent(
    """
    import datetime as dt, sys, time
    from dagster import DagsterInstance
    from atlas_dagster.resources.clickhouse import ClickHouseResource
    with DagsterInstance.get() as instance:
        clickhouse = ClickHouseResource(dsn=sys.argv[1])
        clickhouse._instance = instance
        with clickhouse.day_exclusion("srv.main", "casino", dt.date.fromisoformat(sys.argv[2])):
            print("held", flush=True)
            time.sleep(600)
    """
)

# Inside the exclusion: the probe for the day's backfilled rows (backfill_days.sql), the INSERT,
# the count.
PHASES = ("max(ingested_at) AS loaded_until", "_events_inbound", "SELECT count() AS events")


def test_two_processes_loading_one_day_take_turns(tmp_path: Path) -> None:
    """While one load is inside the day (its INSERT held by the server until the test lets it
    answer), the other waits for the day, and its statements come only after the first's."""
    _, env = _site(tmp_path)
    gate = threading.Event()
    with fake_clickhouse(ROWS, insert_gate=gate) as server:
        loaders = [python(LOADER, server.url, DAY.isoformat(), str(ROWS), env=env) for _ in "ab"]
        try:
            _wait_for_a_line(loaders, f"waiting for the load of srv.main|casino|{DAY}")
            # The other waits from the moment the holder has the day, which may be before the
            # holder's INSERT is sent (its probe comes first): wait for that INSERT, held open
            # by the gate, then only the day's holder has reached it.
            inserts = _poll(
                lambda: server.statements("_events_inbound"), "the holder's INSERT", loaders
            )
            assert len(inserts) == 1, server.requests
        finally:
            gate.set()
        for loader in loaders:
            assert loader.finish(timeout=120) == 0, loader.output
            assert f"loaded {ROWS}" in loader.output
        requests = sorted(
            (r for r in server.requests if any(p in r.body for p in PHASES)),
            key=lambda r: r.started,
        )
    # clear → INSERT → count of one load, then the other's: never interleaved.
    order = [next(p for p in PHASES if p in r.body) for r in requests]
    assert order == [*PHASES, *PHASES], order
    first_count, second_clear = requests[2], requests[3]
    assert second_clear.started >= first_count.finished


def _poll(
    read: Callable[[], list[Request]],
    what: str,
    processes: list[Process],
    timeout: float = 120.0,
) -> list[Request]:
    """`read()` once it is non-empty (bounded poll); on timeout, what the processes said."""
    deadline = time.monotonic() + timeout
    while not (found := read()):
        if time.monotonic() > deadline:
            outputs = "\n---\n".join(process.output for process in processes)
            raise AssertionError(f"{what} never came in {timeout:.0f}s:\n{outputs}")
        time.sleep(0.02)
    return found


def _wait_for_a_line(processes: list[Process], text: str, timeout: float = 120.0) -> str:
    """The first line containing `text` from any of the processes (bounded poll)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in processes:
            for line in list(process.lines):
                if text in line:
                    return line
        time.sleep(0.05)
    outputs = "\n---\n".join(process.output for process in processes)
    raise AssertionError(f"no process said {text!r} in {timeout:.0f}s:\n{outputs}")


def test_a_killed_holder_does_not_keep_the_day_and_a_wait_names_it(tmp_path: Path) -> None:
    _, env = _site(tmp_path)
    holder = python(HOLDER, "http://127.0.0.1:9", DAY.isoformat(), env=env)
    holder.wait_for(lambda line: line == "held")
    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        clickhouse = _resource("http://127.0.0.1:9", instance, wait=2)
        with pytest.raises(DayBusyError) as raised:
            with clickhouse.day_exclusion("srv.main", "casino", DAY):
                pass
        assert f":{holder.pid}:" in str(raised.value), raised.value
        assert "srv.main|casino|2026-11-06" in str(raised.value)
        with clickhouse.day_exclusion("srv.main", "casino", DAY + dt.timedelta(days=1)):
            pass  # another day is not held
        holder.kill()
        with clickhouse.day_exclusion("srv.main", "casino", DAY):
            pass  # freed by the holder's death, with nobody's help


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


@pytest.mark.postgres
def test_on_a_postgres_instance_the_day_is_an_advisory_lock_its_killed_holder_frees(
    tmp_path: Path, postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, env = _site(tmp_path)
    # The production instance file: the connection comes from ATLAS_DAGSTER_PG_* variables.
    Path(env["DAGSTER_HOME"], "dagster.yaml").write_text(postgres_instance_yaml())
    env.update(postgres.env)
    for name, value in postgres.env.items():
        monkeypatch.setenv(name, value)
    holder = python(HOLDER, "http://127.0.0.1:9", DAY.isoformat(), env=env)
    holder.wait_for(lambda line: line == "held", timeout=120)
    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        clickhouse = _resource("http://127.0.0.1:9", instance, wait=2)
        with pytest.raises(DayBusyError) as raised:
            with clickhouse.day_exclusion("srv.main", "casino", DAY):
                pass
        # Named from pg_stat_activity: the holder's worker (pid) and run.
        assert f":{holder.pid}:" in str(raised.value), raised.value
        assert not list(Path(env["DAGSTER_HOME"]).glob("atlas_day_locks/*"))  # not a file lock
        holder.kill()
        # PostgreSQL drops the dead session's lock: the day is taken again within the wait's
        # bound (DayBusyError otherwise), however long the server takes to notice.
        clickhouse = _resource("http://127.0.0.1:9", instance, wait=120)
        with clickhouse.day_exclusion("srv.main", "casino", DAY):
            pass
