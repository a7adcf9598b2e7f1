"""The host dies mid-backfill: every process of the stack (webserver, daemon, code server, run
worker) SIGKILLed while the backfill's ranged run is inside its INSERTs; the stack started again
on the same DAGSTER_HOME and data directory finishes the backfill with no command: the stale-load
sweep fails the dead run, Dagster's run retries relaunch it, the relaunch skips the days the dead
run completed (orchestration/resume.py), and the backfill waits for it. Once as `dagster dev` on
the default SQLite instance with the backfill launched as the UI does, once as webserver + daemon
started separately on PostgreSQL with it launched as `atlas-dagster backfill` does."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dagster import RunsFilter
from dagster._core.storage.tags import RETRY_NUMBER_TAG

from atlas_dagster.cli.dagster_api import FINISHED_BACKFILL_STATUSES, DagsterApi
from atlas_dagster.cli.dagster_dev import DagsterStack
from atlas_dagster.core.tags import BACKFILL_ID_TAG, SELECT_TAG, TENANT_TAG
from atlas_dagster.dagster_internals import pool_info
from atlas_dagster.orchestration.pools import INSERT_POOL
from atlas_dagster.orchestration.selection import DEFAULT_SELECTION
from atlas_dagster.tenants import load_tenants
from testkit.crash_support import (
    SeparateStack,
    alive,
    days_of,
    kill_everything,
    loads_by_run,
    log_states,
    materialized_count,
    parts_in_writing,
    raw_counts,
    run_worker_pid,
    table_folder,
    wait_for_insert,
    wait_until,
    webserver_and_daemon,
    write_window,
)
from testkit.dagster_stack import (
    isolated_env,
    launch_like_the_ui,
    run_dagster_dev,
    write_tenants,
)
from testkit.postgres_server import (
    PostgresServer,
    instance_at,
    postgres_instance_yaml,
    postgres_server,
)

pytestmark = pytest.mark.e2e

ORG = "crash"
DOMAINS = ["casino", "transactions"]
DAYS = days_of(dt.date(2026, 10, 1), dt.date(2026, 10, 8))
# An INSERT of a fraction of a second on this machine: the kill lands while days are loading.
ROWS = 250_000
# Killed once this many day-domains are reported (of 16) and a part is being written.
KILL_AFTER = 4
ENV = {"ATLAS_STALE_SWEEP_SECONDS": "2", "ATLAS_RAMP_UP_DAYS": "3"}
# Bounds against a hang, never a measure of speed (the closing figures are printed).
WAIT_SECONDS = 300


def _key(day: dt.date) -> str:
    return f"{day.isoformat()}|{ORG}.main"


@contextlib.contextmanager
def _stack(
    work: Path, tenants_file: Path, server: PostgresServer | None
) -> Iterator[tuple[DagsterStack, Callable[[], list[int]], SeparateStack | None]]:
    """`dagster dev` on the default instance, or webserver + daemon started apart on the
    PostgreSQL one; with the roots of its process trees, and the separate stack."""
    if server is None:
        with run_dagster_dev(work, tenants_file, ENV) as stack:
            yield stack, lambda: [stack.pid], None
        return
    env = isolated_env(work, tenants_file, {**server.env, **ENV}, postgres_instance_yaml())
    with webserver_and_daemon(env, work) as separate:
        assert separate.stack is not None
        yield separate.stack, lambda: separate.roots, separate


def _launch(api: DagsterApi, cli: bool) -> str:
    """As the UI's dialog does (no day selection: every day), or as `atlas-dagster backfill`
    does: one range per asset, tagged with its default selection (incomplete), which the
    relaunch inherits and applies after skipping what its family completed."""
    assets = [f"tbt_raw_events_{d}" for d in DOMAINS]
    if not cli:
        return launch_like_the_ui(api, [_key(d) for d in DAYS], assets)
    ranges = {asset: [(_key(DAYS[0]), _key(DAYS[-1]))] for asset in assets}
    tags = {TENANT_TAG: f"{ORG}.main", SELECT_TAG: str(DEFAULT_SELECTION)}
    return api.launch_backfill(ranges, "crash", tags)


def _relaunch_in_an_insert(stack: DagsterStack, backfill_id: str) -> int:
    """Once the relaunch's worker runs an INSERT (not the leftover of the host's crash): its pid."""
    data_dir = Path(stack.env["ATLAS_CLICKHOUSE_DSN"][len("chdb://") :])
    folders = [table_folder(data_dir, f"tbt_raw_events_{d}") for d in DOMAINS]
    leftovers = parts_in_writing(folders)  # of the INSERT the host's crash killed
    with instance_at(stack.home, stack.env) as instance:

        def relaunch_pid() -> int | None:
            runs = instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
            relaunched = [r for r in runs if r.parent_run_id is not None]
            return run_worker_pid(instance, relaunched[0].run_id) if relaunched else None

        wait_until(lambda: relaunch_pid() is not None, WAIT_SECONDS, stack.log_tail)
        pid = relaunch_pid()
        assert pid is not None
        wait_for_insert(folders, WAIT_SECONDS, stack.log_tail, leftovers)
    return pid


def _kill_the_relaunchs_worker(stack: DagsterStack, backfill_id: str) -> None:
    """A second crash of another kind: only the relaunch's run worker SIGKILLed, inside an
    INSERT; the stack lives on, so the sweep fails that run and Dagster relaunches it again."""
    pid = _relaunch_in_an_insert(stack, backfill_id)
    os.kill(pid, signal.SIGKILL)
    print(f"killed the relaunch's run worker {pid}")


def _kill_the_daemon_alone(stack: DagsterStack, backfill_id: str, separate: SeparateStack) -> None:
    """Only the daemon SIGKILLed while the relaunch loads, then started again: the run goes on
    (its worker is not the daemon's process), and the new daemon picks the backfill up."""
    pid = _relaunch_in_an_insert(stack, backfill_id)
    daemon = separate.restart_daemon()
    time.sleep(1)
    assert alive(pid), f"run worker {pid} died with the daemon {daemon}"
    print(f"killed the daemon {daemon} alone; run worker {pid} went on")


@contextlib.contextmanager
def _server(storage: str) -> Iterator[PostgresServer | None]:
    if storage == "sqlite":
        yield None
        return
    with postgres_server() as server:
        yield server


@pytest.mark.parametrize(
    "storage", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_backfill_killed_with_its_host_finishes_after_the_restart(
    tmp_path: Path, storage: str
) -> None:
    tenants_file = write_tenants(
        tmp_path / "tenants.yaml",
        [
            {
                "organization_id": ORG,
                "brand_id": "main",
                "source": f"file://{tmp_path / 'exports'}",
                "start_date": DAYS[0].isoformat(),
                "end_date": DAYS[-1].isoformat(),
                "domains": DOMAINS,
            }
        ],
    )
    [tenant] = load_tenants(tenants_file)
    write_window(tenant, DOMAINS, DAYS, ROWS)
    with _server(storage) as server:
        _crash_and_restart(tmp_path, tenants_file, server)


def _crash_and_restart(work: Path, tenants_file: Path, server: PostgresServer | None) -> None:
    total = len(DAYS) * len(DOMAINS)
    with _stack(work, tenants_file, server) as (stack, roots, _):
        dsn = stack.env["ATLAS_CLICKHOUSE_DSN"]
        api = DagsterApi(stack.url)
        backfill_id = _launch(api, cli=server is not None)
        with instance_at(stack.home, stack.env) as instance:
            wait_until(
                lambda: materialized_count(instance, backfill_id) >= KILL_AFTER,
                WAIT_SECONDS,
                stack.log_tail,
            )
            data_dir = Path(dsn[len("chdb://") :])
            folders = [table_folder(data_dir, f"tbt_raw_events_{d}") for d in DOMAINS]
            wait_for_insert(folders, WAIT_SECONDS, stack.log_tail)
            killed = kill_everything(roots())
            killed_at = time.monotonic()
    print(f"killed {len(killed)} process(es)")

    at_crash = log_states(dsn, ORG)
    completed = [k for k, v in at_crash.items() if v["status"] == "completed"]
    running = [k for k, v in at_crash.items() if v["status"] == "running"]
    never_started = total - len(at_crash)
    print(
        f"at the crash: {len(completed)} completed, {len(running)} running, "
        f"{never_started} not started"
    )
    # Inside its INSERTs: not before the first day, not after the last.
    assert completed and running and never_started > 0, at_crash

    with _stack(work, tenants_file, server) as (stack, _, separate):
        restarted_at = time.monotonic()
        api = DagsterApi(stack.url)
        if separate is None:
            _kill_the_relaunchs_worker(stack, backfill_id)
        else:
            _kill_the_daemon_alone(stack, backfill_id, separate)
        status = api.backfill_status(backfill_id)
        deadline = time.monotonic() + WAIT_SECONDS
        while status["status"] not in FINISHED_BACKFILL_STATUSES:
            assert time.monotonic() < deadline, f"backfill still {status}:\n{stack.log_tail()}"
            time.sleep(1)
            status = api.backfill_status(backfill_id)
        finished_at = time.monotonic()
        with instance_at(stack.home, stack.env) as instance:
            runs = instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
            pool = pool_info(instance, INSERT_POOL)
            loads, resumed = loads_by_run(instance, [r.run_id for r in runs])
        tail = stack.log_tail(120)
    print(
        f"restart to backfill {status['status']}: {finished_at - restarted_at:.1f}s "
        f"(crash to finish {finished_at - killed_at:.1f}s); runs: "
        + ", ".join(
            f"{r.run_id[:8]} {r.status.value} parent={str(r.parent_run_id)[:8]}" for r in runs
        )
    )

    assert status["status"] == "COMPLETED_SUCCESS", (status, tail)
    # The crashed run, then each relaunch of the one before (newest last); only the last succeeded.
    crashed, *relaunches = sorted(runs, key=lambda r: int(r.tags.get(RETRY_NUMBER_TAG, "0")))
    chain = [crashed, *relaunches]
    # SQLite: the relaunch's worker was killed too; PostgreSQL: only the daemon, the run went on.
    assert len(chain) == (3 if server is None else 2), chain
    assert all(r.parent_run_id == p.run_id for p, r in zip(chain, relaunches, strict=False))
    assert [r.status.value for r in chain] == ["FAILURE"] * (len(chain) - 1) + ["SUCCESS"]
    # Each day-domain loaded to completion by one run of the family only; one a killed run
    # completed without reporting it is reported by the relaunch, without a load.
    twice = {k: v for k, v in loads.items() if len(v) > 1}
    assert not twice and not (resumed & set(loads)), (twice, resumed)
    assert len(loads) + len(resumed) == total, (loads, resumed)

    after = log_states(dsn, ORG)
    counts = raw_counts(dsn, ORG, DOMAINS)
    expected = {(d, day) for d in DOMAINS for day in DAYS}
    assert set(after) == expected and all(v["status"] == "completed" for v in after.values())
    assert counts == {k: ROWS for k in expected}, counts
    # Completed before the crash: not loaded again (same attempt, same run).
    for key in completed:
        assert after[key]["attempt"] == at_crash[key]["attempt"], (key, after[key])
        assert after[key]["run_id"] == crashed.run_id
    # Running at the crash: loaded again by a relaunch, as a later attempt.
    for key in running:
        assert after[key]["run_id"] in {r.run_id for r in relaunches}
        assert after[key]["attempt"] > at_crash[key]["attempt"]
    assert pool.claimed_slots == [], pool.claimed_slots
