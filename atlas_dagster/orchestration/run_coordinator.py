"""The run coordinator named in dagster.yaml: newest-day-first priorities and backfill gating.

Dagster's asset backfills submit their runs oldest partition first, and the run queue dequeues by
the `dagster/priority` tag, then first in, first out. So every run gets a priority from its
newest partition date, and a backfill's raw runs are held in the queue until the backfill has
submitted all of them: only then can the queue pick the newest day first. Runs of one backfill
that load the same tenant are serialized, so a lane (tenant and domain) split over several runs
(a re-execution of scattered failed days) still starts its days newest first. A backfill over
several tenants (a fleet) is not held: its first raw run loads the whole fleet in one order and
the others are covered by it (`fleet_tags`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from dagster import (
    AssetKey,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    MultiPartitionsDefinition,
    QueuedRunCoordinator,
    RunsFilter,
    SubmitRunContext,
)

from atlas_dagster.core.tags import (
    BACKFILL_ID_TAG,
    COVERED_BY_TAG,
    FLEET_LEADER_TAG,
    HELD_TAG,
    LANE_GROUP_TAG,
    PRIORITY_TAG,
)
from atlas_dagster.dagster_internals import backfill_target_partitions, coordinator_instance
from atlas_dagster.domains import RAW_ASSET_KEYS
from atlas_dagster.partitions import (
    backfill_raw_partitions,
    date_of_key,
    day_priority,
    partitions_for,
    run_partition_bounds,
    tenant_of_key,
)
from atlas_dagster.settings import Settings
from atlas_dagster.tenants import load_tenants

# The queue limits that make the tags above work, always in force whatever dagster.yaml says.
TAG_CONCURRENCY_LIMITS: list[dict[str, Any]] = [
    {"key": HELD_TAG, "value": "true", "limit": 0},
    {"key": LANE_GROUP_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1},
]

log = logging.getLogger("atlas_dagster.run_coordinator")


def priority_tags(run: DagsterRun) -> dict[str, str]:
    """A priority from the run's newest partition date, unless someone set one already."""
    bounds = run_partition_bounds(run.tags)
    if PRIORITY_TAG in run.tags or bounds is None:
        return {}
    dates = [d for d in (date_of_key(bounds[0]), date_of_key(bounds[1])) if d is not None]
    return {PRIORITY_TAG: str(day_priority(max(dates)))} if dates else {}


def loads_raw(run: DagsterRun) -> bool:
    return bool(run.asset_selection and RAW_ASSET_KEYS & set(run.asset_selection))


def backfill_tags(run: DagsterRun) -> dict[str, str]:
    """Hold a backfill's raw run and put it in its tenant's lane group."""
    backfill_id = run.tags.get(BACKFILL_ID_TAG)
    bounds = run_partition_bounds(run.tags)
    if not backfill_id or bounds is None or not loads_raw(run):
        return {}
    first, last = (tenant_of_key(b) for b in bounds)
    tenant = first if first == last else "*"
    return {HELD_TAG: "true", LANE_GROUP_TAG: f"{backfill_id}:{tenant}"}


def expected_raw_runs(
    instance: DagsterInstance, backfill_id: str, partitions_def: MultiPartitionsDefinition
) -> int | None:
    """How many raw runs the backfill submits: one per partition range of each group of raw
    assets sharing a partition selection, as Dagster's single-run backfill policy splits them
    (ranges of `partitions_def`, the code location's tenants × days)."""
    target = backfill_target_partitions(instance, backfill_id)
    if target is None:
        return None
    groups = {
        frozenset(subset.get_partition_keys())
        for asset_key, subset in target.items()
        if asset_key in RAW_ASSET_KEYS
    }
    return sum(
        len(
            partitions_def.subset_with_partition_keys(keys).get_partition_key_ranges(partitions_def)
        )
        for keys in groups
    )


def held_runs(instance: DagsterInstance, backfill_id: str) -> Sequence[DagsterRun]:
    return instance.get_runs(
        RunsFilter(
            tags={BACKFILL_ID_TAG: backfill_id, HELD_TAG: "true"},
            statuses=[DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED],
        )
    )


def release_backfill(instance: DagsterInstance, backfill_id: str, reason: str) -> int:
    runs = held_runs(instance, backfill_id)
    for run in runs:
        instance.add_run_tags(run.run_id, {HELD_TAG: "false"})
    if runs:
        log.info("released %d held run(s) of backfill %s: %s", len(runs), backfill_id, reason)
    return len(runs)


def release_if_fully_submitted(
    instance: DagsterInstance, backfill_id: str, partitions_def: MultiPartitionsDefinition
) -> bool:
    expected = expected_raw_runs(instance, backfill_id, partitions_def)
    submitted = [
        r
        for r in instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
        if loads_raw(r)
    ]
    if expected is not None and len(submitted) < expected:
        return False
    release_backfill(instance, backfill_id, f"all {len(submitted)} raw run(s) are queued")
    return True


def fleet_assets(instance: DagsterInstance, backfill_id: str) -> frozenset[AssetKey] | None:
    """The raw assets of a backfill over several tenants whose raw assets all target the same
    partitions (what makes it a fleet), or None."""
    target = backfill_raw_partitions(instance, backfill_id)
    keysets = {frozenset(keys) for keys in target.values()}
    if len(keysets) != 1:
        return None
    [keys] = keysets
    return frozenset(target) if len({tenant_of_key(k) for k in keys}) > 1 else None


def fleet_tags(
    instance: DagsterInstance, run: DagsterRun, assets: frozenset[AssetKey] | None
) -> dict[str, str] | None:
    """The fleet role of a backfill's raw run, or None when the backfill is not a fleet.

    Dagster splits a backfill of more days than tenants into one run per tenant (it groups a
    multi-partition selection by the dimension with fewer keys), creates them one after the other
    with a planned event per partition (~1,500 per tenant-year), and a few run at once: run by
    run, each tenant would load its whole range before the next started. So the first raw run
    submitted for a fleet backfill leads: it loads the backfill's whole raw target in one order,
    newest day first across the tenants, and starts at once. The runs submitted after it are
    covered by it and finish at once. Dagster's bookkeeping follows: a backfill's partition is
    materialized by any of its runs, and what a covered run leaves without status is marked
    failed once all runs are done.
    """
    backfill_id = run.tags.get(BACKFILL_ID_TAG)
    if assets is None or not backfill_id or set(run.asset_selection or ()) != assets:
        return None
    if run.tags.get(FLEET_LEADER_TAG) == "true":
        # A retry of the leader (it inherits its tags) leads again: found among the leaders, it
        # would find itself covered by itself and load nothing.
        return {FLEET_LEADER_TAG: "true"}
    leaders = instance.get_runs(
        RunsFilter(tags={BACKFILL_ID_TAG: backfill_id, FLEET_LEADER_TAG: "true"})
    )
    if leaders:
        return {COVERED_BY_TAG: leaders[0].run_id}
    return {FLEET_LEADER_TAG: "true"}


class AtlasRunCoordinator(QueuedRunCoordinator):
    """QueuedRunCoordinator that tags runs for newest-first dequeueing before enqueueing them.

    Dagster builds it from dagster.yaml in the daemon's and webserver's processes: that is where
    it is wired, so it reads the settings there, once (ATLAS_TENANTS_FILE), and passes them down.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        limits = list(kwargs.pop("tag_concurrency_limits", None) or [])
        limits += [limit for limit in TAG_CONCURRENCY_LIMITS if limit not in limits]
        super().__init__(*args, tag_concurrency_limits=limits, **kwargs)
        self._tenants_file = Settings.from_env().tenants_file
        self._fleet_assets: dict[str, frozenset[AssetKey] | None] = {}
        # Per backfill: the tenants × days its runs' ranges are counted in, read from the
        # tenants file when its first held run is submitted (a tenant added later joins the
        # next backfill, as it joins the code location when that reloads).
        self._partitions: dict[str, MultiPartitionsDefinition] = {}

    def _partitions_of(self, backfill_id: str) -> MultiPartitionsDefinition:
        if backfill_id not in self._partitions:
            self._partitions[backfill_id] = partitions_for(load_tenants(self._tenants_file))
        return self._partitions[backfill_id]

    def submit_run(self, context: SubmitRunContext) -> DagsterRun:
        run = context.dagster_run
        instance = coordinator_instance(self)
        fleet = None
        backfill_id = run.tags.get(BACKFILL_ID_TAG)
        if backfill_id and loads_raw(run) and run_partition_bounds(run.tags) is not None:
            if backfill_id not in self._fleet_assets:  # read the backfill's target once
                self._fleet_assets[backfill_id] = fleet_assets(instance, backfill_id)
            fleet = fleet_tags(instance, run, self._fleet_assets[backfill_id])
        # A fleet's runs are not held: the leader orders the whole fleet itself.
        tags = priority_tags(run) | (fleet if fleet is not None else backfill_tags(run))
        if tags:
            instance.add_run_tags(run.run_id, tags)
        submitted = super().submit_run(context)
        if HELD_TAG in tags and backfill_id:
            try:
                release_if_fully_submitted(instance, backfill_id, self._partitions_of(backfill_id))
            except Exception:  # the sweep sensor releases what this could not
                log.exception("could not check whether backfill %s is fully queued", backfill_id)
        return submitted
