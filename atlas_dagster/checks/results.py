"""A check's outcome for one tenant-day, and its Dagster form: a partitioned check evaluation per
tenant-day that targets the partition's latest materialization, stored in batches, plus the
step's check outputs once all of them are reported."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    MetadataValue,
    OpExecutionContext,
    Output,
)

from atlas_dagster.dagster_internals import (
    check_evaluation_entry,
    check_output_name,
    store_check_evaluations,
    target_materialization,
)

# Evaluations stored per transaction: a load's batch holds at most 512 days × 3 checks; verify
# stores a tenant-domain window at once (3 years: 3,288), in transactions of at most this many,
# so that the instance's database (SQLite: one writer) is never held for long (~1 s here).
STORE_BATCH = 2_000


@dataclass(frozen=True)
class CheckOutcome:
    check_name: str
    passed: bool
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)


# (asset key, partition key, outcome): one check of one tenant-day.
PartitionOutcome = tuple[AssetKey, str, CheckOutcome]


def to_evaluation(
    asset_key: AssetKey, partition_key: str, outcome: CheckOutcome, target: Any = None
) -> AssetCheckEvaluation:
    """A per-partition evaluation: AssetCheckResult reads the step's single partition key, which a
    ranged run does not have, so the evaluation names its partition itself. `target` is the
    partition's latest materialization (target_materialization): without it Dagster counts the
    result as stale once the partition has one, and its partition health view leaves the day
    blank, neither passed nor failed."""
    return AssetCheckEvaluation(
        asset_key=asset_key,
        check_name=outcome.check_name,
        passed=outcome.passed,
        metadata={k: _metadata_value(v) for k, v in outcome.metadata.items()},
        target_materialization_data=target,
        severity=AssetCheckSeverity.ERROR,
        description=outcome.description,
        blocking=False,
        partition=partition_key,
    )


def report_outcomes(
    context: AssetExecutionContext | OpExecutionContext,
    outcomes: Sequence[PartitionOutcome],
    check_keys: set[AssetCheckKey] | None = None,
) -> int:
    """Stores `outcomes` of the step's selected checks (or of `check_keys`) as evaluations in
    its run's event log, a batch to a transaction; returns how many were stored. Each targets
    its partition's latest materialization, read in bulk (a day loaded by this run has its
    materialization stored by now: the step yields it before its checks are reported)."""
    selected = context.selected_asset_check_keys if check_keys is None else check_keys
    wanted = [o for o in outcomes if AssetCheckKey(o[0], o[2].check_name) in selected]
    if not wanted:
        return 0
    partitions: dict[AssetKey, set[str]] = {}
    for asset_key, partition_key, _ in wanted:
        partitions.setdefault(asset_key, set()).add(partition_key)
    targets = latest_materializations(context.instance, partitions)
    entries = [
        check_evaluation_entry(
            context,
            to_evaluation(asset_key, key, outcome, targets.get((asset_key, key))),
        )
        for asset_key, key, outcome in wanted
    ]
    for start in range(0, len(entries), STORE_BATCH):
        store_check_evaluations(context.instance, entries[start : start + STORE_BATCH])
    return len(entries)


def latest_materializations(
    instance: DagsterInstance, partitions: dict[AssetKey, set[str]]
) -> dict[tuple[AssetKey, str], Any]:
    """Each partition's latest materialization, as a check evaluation's target (public
    fetch_materializations, newest first, a page per asset until every partition has one)."""
    found: dict[tuple[AssetKey, str], Any] = {}
    for asset_key, keys in partitions.items():
        cursor, wanted = None, set(keys)
        while wanted:
            page = instance.fetch_materializations(
                AssetRecordsFilter(asset_key=asset_key, asset_partitions=sorted(wanted)),
                limit=len(wanted) + 100,
                cursor=cursor,
            )
            for record in page.records:
                partition = record.partition_key
                if partition in wanted:
                    wanted.discard(partition)
                    found[(asset_key, partition)] = target_materialization(
                        record.storage_id, record.run_id, record.timestamp
                    )
            if not page.has_more:
                break
            cursor = page.cursor
    return found


def check_outputs(context: AssetExecutionContext) -> Iterator[Output]:
    """The step's selected checks, reported as done: yield after their per-partition evaluations.

    Dagster expects one output per selected check of a step. For an AssetCheckResult it yields
    that output itself (Output(None) next to the evaluation, in its step execution's
    `_process_user_event`, dagster 1.13.27); evaluations logged or stored directly carry no
    output, so without these the step logs "did not yield or return expected outputs". One
    output per check whatever the number of tenant-days: the results stay the per-partition
    evaluations.
    """
    for check_key in sorted(context.selected_asset_check_keys, key=lambda k: k.to_user_string()):
        yield Output(None, output_name=check_output_name(context.assets_def, check_key))


def _metadata_value(value: Any) -> MetadataValue:
    if isinstance(value, MetadataValue):
        return value
    if isinstance(value, bool):
        return MetadataValue.bool(value)
    if isinstance(value, int):
        return MetadataValue.int(value)
    if isinstance(value, float):
        return MetadataValue.float(value)
    return MetadataValue.text("" if value is None else str(value))
