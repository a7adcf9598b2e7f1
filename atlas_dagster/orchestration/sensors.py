"""Sensors that keep backfill_log honest: days left 'running' by a dead run become 'failed'."""

from __future__ import annotations

from dagster import (
    DagsterRun,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunFailureSensorContext,
    RunStatusSensorContext,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    run_failure_sensor,
    run_status_sensor,
    sensor,
)

from atlas_dagster.monitoring.stale_loads import (
    StaleLoad,
    SweepResult,
    fail_loads_of_run,
    sweep,
)
from atlas_dagster.orchestration.pools import INSERT_POOL, reclaim_dead_claims
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.embedded_engine import EngineBusyError
from atlas_dagster.resources.schema import ensure_schema

# A tick must end well inside Dagster's sensor evaluation timeout (60 s), so a sensor waits for
# the embedded engine briefly and leaves a busy tick to the next sweep instead of queueing.
SENSOR_LOCK_WAIT_SECONDS = 10.0


def brief_engine(clickhouse: ClickHouseResource) -> ClickHouseResource:
    return ClickHouseResource(
        dsn=clickhouse.dsn,
        cluster=clickhouse.cluster,
        embedded_inflight_mb=clickhouse.embedded_inflight_mb,
        lock_wait_seconds=min(clickhouse.lock_wait_seconds, SENSOR_LOCK_WAIT_SECONDS),
    )


def _summary(marked: list[StaleLoad]) -> str:
    return "; ".join(f"{item.load.label}: {item.reason}" for item in marked)


def _fail_loads_of(
    context: RunStatusSensorContext, run: DagsterRun, clickhouse: ClickHouseResource
) -> SkipReason:
    try:
        with brief_engine(clickhouse).session() as client:
            ensure_schema(client)  # the worker column may be newer than the database
            marked = fail_loads_of_run(client, run)
    except EngineBusyError as exc:
        # The cursor moves on regardless; the periodic sweep finds these days later.
        return SkipReason(f"{exc}; the stale-load sweep will mark run {run.run_id}'s days")
    for item in marked:
        context.log.warning(f"{item.load.label} marked failed: {item.reason}")
    if not marked:
        return SkipReason(f"run {run.run_id} left no 'running' day in backfill_log")
    return SkipReason(f"marked {len(marked)} day(s) failed: {_summary(marked)}")


# monitor_all_code_locations: runs started by `atlas-dagster load` (in-process materialize)
# carry no code location, and only this setting lets the sensor see them.
@run_failure_sensor(
    name="backfill_log_failed_runs",
    default_status=DefaultSensorStatus.RUNNING,
    monitor_all_code_locations=True,
    description="Marks the 'running' backfill_log days of a failed run as failed.",
)
def backfill_log_failed_runs(
    context: RunFailureSensorContext, clickhouse: ClickHouseResource
) -> SkipReason:
    return _fail_loads_of(context, context.dagster_run, clickhouse)


@run_status_sensor(
    run_status=DagsterRunStatus.CANCELED,
    name="backfill_log_canceled_runs",
    default_status=DefaultSensorStatus.RUNNING,
    monitor_all_code_locations=True,
    description="Marks the 'running' backfill_log days of a canceled run as failed.",
)
def backfill_log_canceled_runs(
    context: RunStatusSensorContext, clickhouse: ClickHouseResource
) -> SkipReason:
    return _fail_loads_of(context, context.dagster_run, clickhouse)


def stale_sweep_sensor(interval_seconds: int) -> SensorDefinition:
    """The stale-load sweep, every `interval_seconds` (ATLAS_STALE_SWEEP_SECONDS)."""

    @sensor(
        name="backfill_log_stale_sweep",
        minimum_interval_seconds=interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        description=(
            "Marks 'running' backfill_log days failed when their Dagster run is finished or "
            "unknown, or their worker process on this host is gone; fails STARTED runs whose "
            "worker died; frees atlas_insert slots whose holder is dead."
        ),
    )
    def backfill_log_stale_sweep(
        context: SensorEvaluationContext, clickhouse: ClickHouseResource
    ) -> SkipReason:
        return _stale_sweep(context, clickhouse)

    return backfill_log_stale_sweep


def _stale_sweep(context: SensorEvaluationContext, clickhouse: ClickHouseResource) -> SkipReason:
    # Pool claims of dead processes first: they need no engine, and a busy engine must not
    # keep them leaked.
    reclaim_dead_claims(context.instance, INSERT_POOL, context.log)
    try:
        with brief_engine(clickhouse).session() as client:
            ensure_schema(client)
            result = sweep(client, context.instance)
    except EngineBusyError as exc:
        return SkipReason(f"{exc}; retrying on the next tick")
    for run_id in result.failed_runs:
        context.log.warning(f"reported run {run_id} failed: its worker process is gone")
        if not context.instance.run_retries_enabled:
            # Nothing relaunches it: say so where the operator looks, with the way out.
            context.log.warning(
                f"run_retries is off in this instance's dagster.yaml: nothing relaunches run "
                f"{run_id}; `atlas-dagster backfill` over the same window loads the days that "
                "did not complete (docs/operations.md)"
            )
    for item in result.marked:
        context.log.warning(f"{item.load.label} marked failed: {item.reason}")
    return SkipReason(_sweep_summary(result))


def _sweep_summary(result: SweepResult) -> str:
    if not (result.marked or result.failed_runs):
        return "no stale loads"
    text = f"marked {len(result.marked)} day(s) failed"
    if result.failed_runs:
        text += f"; reported run(s) {', '.join(result.failed_runs)} failed"
    return f"{text}: {_summary(result.marked)}"


def backfill_log_sensors(stale_sweep_seconds: int) -> list[SensorDefinition]:
    return [
        backfill_log_failed_runs,
        backfill_log_canceled_runs,
        stale_sweep_sensor(stale_sweep_seconds),
    ]
