"""Stale loads: worker liveness, the sweep sensor and the run failure / canceled sensors."""

import datetime as dt
import os
import socket
import subprocess

import pytest
from dagster import (
    DagsterRunStatus,
    SkipReason,
    build_run_status_sensor_context,
    build_sensor_context,
    instance_for_test,
)

from atlas_dagster.core.tags import WILL_RETRY_TAG
from atlas_dagster.core.workers import (
    Worker,
    WorkerState,
    current_worker,
    parse_worker,
    start_ticks,
    worker_state,
)
from atlas_dagster.monitoring.stale_loads import announce_retry, mark_failed, running_loads
from atlas_dagster.orchestration.sensors import (
    backfill_log_canceled_runs,
    backfill_log_failed_runs,
    stale_sweep_sensor,
)
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.scope import Scope
from atlas_dagster_tests.backfill_log_rows import (
    dead_worker,
    failing_job,
    insert_log_rows,
    log_entry,
    log_rows,
    started_run,
    succeeding_job,
    utc_now,
    wait_for_zombie,
)

pytestmark = pytest.mark.slow  # seconds per test: real loads and runs

DAYS = [dt.date(2026, 10, 1) + dt.timedelta(days=i) for i in range(6)]
TAIL = "; the load stopped without logging its result"
# The sweep as the code location builds it (its interval is ATLAS_STALE_SWEEP_SECONDS).
backfill_log_stale_sweep = stale_sweep_sensor(30)


def test_worker_states_from_proc() -> None:
    me = current_worker()
    assert parse_worker(str(me)) == me and me.pid == os.getpid()
    assert worker_state(str(me)) is WorkerState.ALIVE
    assert worker_state(str(dead_worker())) is WorkerState.GONE
    assert worker_state(str(Worker(me.host, me.pid, me.start_ticks + 1))) is WorkerState.REUSED
    assert worker_state(f"another-{me.host}:{me.pid}:{me.start_ticks}") is WorkerState.ELSEWHERE
    assert worker_state("") is WorkerState.UNKNOWN
    # A killed child its parent has not reaped yet still has /proc/<pid>: it is gone all the same.
    child = subprocess.Popen(["cat"], stdin=subprocess.PIPE)
    zombie = Worker(socket.gethostname(), child.pid, start_ticks(child.pid) or 0)
    child.kill()
    wait_for_zombie(child.pid)
    assert worker_state(str(zombie)) is WorkerState.GONE
    child.communicate()


def test_sweep_fails_dead_loads_and_their_runs_and_spares_live_ones(
    clickhouse, make_tenant
) -> None:
    tenant = make_tenant(("casino",))
    me, dead = current_worker(), dead_worker()
    with instance_for_test() as instance:
        succeeded = succeeding_job.execute_in_process(instance=instance).dagster_run
        killed, alive, reused, elsewhere = (started_run(instance) for _ in range(4))
        running = {
            DAYS[0]: (succeeded.run_id, ""),
            DAYS[1]: ("a-run-no-instance-knows", ""),
            DAYS[2]: (killed.run_id, str(dead)),
            DAYS[3]: (alive.run_id, str(me)),
            DAYS[4]: (reused.run_id, str(Worker(me.host, me.pid, me.start_ticks + 1))),
            DAYS[5]: (elsewhere.run_id, f"another-{me.host}:{me.pid}:{me.start_ticks}"),
        }
        entries = [
            log_entry(tenant, "casino", day, "running", run_id=run_id, worker=worker, attempt=2)
            for day, (run_id, worker) in running.items()
        ]
        insert_log_rows(clickhouse, entries)
        context = build_sensor_context(instance=instance, resources={"clickhouse": clickhouse})
        tick = backfill_log_stale_sweep(context)

        assert isinstance(tick, SkipReason) and "marked" in tick.skip_message
        after = log_rows(clickhouse, tenant)
        expected = {
            DAYS[0]: f"stale: Dagster run {succeeded.run_id} is SUCCESS",
            DAYS[1]: "stale: Dagster run a-run-no-instance-knows is unknown to this Dagster "
            "instance",
            DAYS[2]: f"stale: worker pid {dead.pid} on host {dead.host} is gone; "
            f"Dagster run {killed.run_id} is STARTED",
            DAYS[4]: f"stale: worker pid {me.pid} on host {me.host} was reused by a newer "
            f"process; Dagster run {reused.run_id} is STARTED",
        }
        for entry in entries:
            row = after[("casino", entry["partition_date"])]
            message = expected.get(entry["partition_date"])
            assert row["status"] == ("failed" if message else "running")
            assert row["error_message"] == (message + TAIL if message else "")
            assert (row["run_id"], row["attempt"], row["worker"]) == (
                entry["run_id"],
                2,
                entry["worker"],
            )
            assert row["started_at"].replace(tzinfo=None) == entry["started_at"]
            updated = row["updated_at"].replace(tzinfo=None)
            assert updated > entry["updated_at"] if message else updated == entry["updated_at"]

        # Dagster cannot see a SIGKILLed run worker: the sweep reports those runs failed.
        status = {r.run_id: instance.get_run_by_id(r.run_id).status for r in (killed, reused)}
        assert set(status.values()) == {DagsterRunStatus.FAILURE}
        assert instance.get_run_by_id(alive.run_id).status == DagsterRunStatus.STARTED
        assert instance.get_run_by_id(elsewhere.run_id).status == DagsterRunStatus.STARTED

        # Nothing left to do: a second tick marks none of this tenant's days again.
        backfill_log_stale_sweep(context)
        assert log_rows(clickhouse, tenant) == after


def test_a_day_that_moved_on_after_being_judged_is_left_alone(clickhouse, make_tenant) -> None:
    """Between judging a 'running' version and marking it, its load may log a result or a
    retry may log a new 'running' attempt: neither is overwritten."""
    tenant = make_tenant(("user",))
    insert_log_rows(
        clickhouse,
        [log_entry(tenant, "user", day, "running", run_id="r1") for day in DAYS[:2]],
    )
    with clickhouse.session() as client:
        judged = running_loads(client, Scope(tenant.organization_id))
    assert [load.partition_date for load in judged] == DAYS[:2]
    insert_log_rows(
        clickhouse,
        [
            log_entry(tenant, "user", DAYS[0], "completed", run_id="r1", rows_loaded=9),
            log_entry(tenant, "user", DAYS[1], "running", run_id="r2", attempt=2),
        ],
    )
    with clickhouse.session() as client:
        assert not any(mark_failed(client, load, "stale: test") for load in judged)
    rows = log_rows(clickhouse, tenant)
    assert (rows[("user", DAYS[0])]["status"], rows[("user", DAYS[0])]["rows_loaded"]) == (
        "completed",
        9,
    )
    assert (rows[("user", DAYS[1])]["status"], rows[("user", DAYS[1])]["run_id"]) == (
        "running",
        "r2",
    )


def test_run_failure_sensor_fails_the_runs_running_days(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("user",))
    with instance_for_test() as instance:
        result = failing_job.execute_in_process(instance=instance, raise_on_error=False)
        run = result.dagster_run
        assert run.status == DagsterRunStatus.FAILURE
        insert_log_rows(
            clickhouse,
            [
                # Its worker is alive (this process), yet the run is over: nothing will finish it.
                log_entry(
                    tenant,
                    "user",
                    DAYS[0],
                    "running",
                    run_id=run.run_id,
                    worker=str(current_worker()),
                ),
                log_entry(tenant, "user", DAYS[1], "completed", run_id=run.run_id, rows_loaded=5),
                log_entry(tenant, "user", DAYS[2], "running", run_id="another-run"),
            ],
        )
        context = build_run_status_sensor_context(
            sensor_name="backfill_log_failed_runs",
            dagster_event=result.get_run_failure_event(),
            dagster_instance=instance,
            dagster_run=run,
            resources={"clickhouse": clickhouse},
        )
        tick = backfill_log_failed_runs(context)
    assert "marked 1 day(s) failed" in tick.skip_message
    rows = log_rows(clickhouse, tenant)
    failed = rows[("user", DAYS[0])]
    assert failed["status"] == "failed"
    worker = current_worker()
    assert failed["error_message"] == (
        f"stale: Dagster run {run.run_id} (worker pid {worker.pid} on host {worker.host}) "
        f"ended with status FAILURE while this day was still 'running'{TAIL}"
    )
    assert rows[("user", DAYS[1])]["status"] == "completed"
    assert rows[("user", DAYS[2])]["status"] == "running"


def test_canceled_run_sensor_fails_the_runs_running_days(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("user",))
    with instance_for_test() as instance:
        run = started_run(instance)
        insert_log_rows(
            clickhouse, [log_entry(tenant, "user", DAYS[0], "running", run_id=run.run_id)]
        )
        event = instance.report_run_canceled(run)
        run = instance.get_run_by_id(run.run_id)
        assert run.status == DagsterRunStatus.CANCELED
        context = build_run_status_sensor_context(
            sensor_name="backfill_log_canceled_runs",
            dagster_event=event,
            dagster_instance=instance,
            dagster_run=run,
            resources={"clickhouse": clickhouse},
        )
        backfill_log_canceled_runs(context)
    row = log_rows(clickhouse, tenant)[("user", DAYS[0])]
    assert row["status"] == "failed"
    assert f"Dagster run {run.run_id} ended with status CANCELED" in row["error_message"]
    assert row["updated_at"].replace(tzinfo=None) > utc_now() - dt.timedelta(minutes=1)


def test_sweep_skips_a_tick_while_the_embedded_engine_is_busy(clickhouse) -> None:
    """A busy engine: the tick gives up at the resource's own bound (1 s, below the sensors'
    SENSOR_LOCK_WAIT_SECONDS) and leaves the sweep to the next tick, rather than queueing."""
    impatient = ClickHouseResource(dsn=clickhouse.dsn, lock_wait_seconds=1.0)
    with instance_for_test() as instance, clickhouse.session():  # a load holds the engine
        context = build_sensor_context(instance=instance, resources={"clickhouse": impatient})
        tick = backfill_log_stale_sweep(context)
    assert "busy" in tick.skip_message and "next tick" in tick.skip_message
    assert "(the bound is 1s)" in tick.skip_message, tick.skip_message


@pytest.mark.parametrize("max_retries", [1, 0])
def test_a_run_failed_for_its_dead_worker_is_announced_as_retried_before_it_fails(
    max_retries: int,
) -> None:
    """dagster#34204: Dagster tags a failed run will_retry only after the failure is stored, so a
    backfill tick in between would end the backfill. The sweep tags it first, when retries
    allow; Dagster's own decision follows (true with a retry left, false without)."""
    settings = {"run_retries": {"enabled": True, "max_retries": max_retries}}
    with instance_for_test(overrides=settings) as instance:
        run = started_run(instance)
        seen: list[str | None] = []
        original = instance.report_run_failed

        def report_run_failed(failing, message=None, job_failure_data=None):
            seen.append(instance.get_run_by_id(failing.run_id).tags.get(WILL_RETRY_TAG))
            return original(failing, message, job_failure_data)

        instance.report_run_failed = report_run_failed  # what the tag was at the failure
        announce_retry(instance, run)
        instance.report_run_failed(run, "worker gone")
        after = instance.get_run_by_id(run.run_id)
    assert seen == (["true"] if max_retries else [None])
    assert after.status == DagsterRunStatus.FAILURE
    assert after.tags[WILL_RETRY_TAG] == ("true" if max_retries else "false")
