"""A sensor that releases a backfill's held raw runs if the coordinator could not (a safety net)."""

from __future__ import annotations

import time

from dagster import (
    DagsterRunStatus,
    DefaultSensorStatus,
    MultiPartitionsDefinition,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)

from atlas_dagster.core.tags import BACKFILL_ID_TAG, HELD_TAG
from atlas_dagster.dagster_internals import backfill_is_requested
from atlas_dagster.orchestration.run_coordinator import release_backfill, release_if_fully_submitted

# A backfill submits its runs within seconds; a hold older than this means submission stopped.
HOLD_TIMEOUT_SECONDS = 120


def release_held_runs_sensor(partitions: MultiPartitionsDefinition) -> SensorDefinition:
    """The sensor, counting a backfill's runs in `partitions` (the code location's tenants ×
    days, as the coordinator counts them)."""

    @sensor(
        name="release_held_backfill_runs",
        minimum_interval_seconds=15,
        default_status=DefaultSensorStatus.RUNNING,
        description="Releases queued raw runs of a backfill once all of them are queued, or when "
        "the backfill stopped submitting (canceled, failed, or held longer than 2 minutes).",
    )
    def release_held_backfill_runs(context: SensorEvaluationContext) -> SkipReason:
        return release_held(context, partitions)

    return release_held_backfill_runs


def release_held(
    context: SensorEvaluationContext, partitions: MultiPartitionsDefinition
) -> SkipReason:
    instance = context.instance
    records = instance.get_run_records(
        RunsFilter(tags={HELD_TAG: "true"}, statuses=[DagsterRunStatus.QUEUED])
    )
    oldest: dict[str, float] = {}
    for record in records:
        backfill_id = record.dagster_run.tags.get(BACKFILL_ID_TAG, "")
        created = record.create_timestamp.timestamp()
        oldest[backfill_id] = min(created, oldest.get(backfill_id, created))
    released = []
    for backfill_id, created in oldest.items():
        if backfill_id and release_if_fully_submitted(instance, backfill_id, partitions):
            released.append(backfill_id)
            continue
        stopped = not (backfill_id and backfill_is_requested(instance, backfill_id))
        if stopped or time.time() - created > HOLD_TIMEOUT_SECONDS:
            release_backfill(instance, backfill_id, "the backfill stopped submitting runs")
            released.append(backfill_id)
    return SkipReason(
        f"released held runs of {released}" if released else "no held runs to release"
    )
