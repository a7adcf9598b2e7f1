"""A check's outcome for one tenant-day, and its Dagster form: a partitioned check evaluation per
tenant-day, plus the step's check outputs once all of them are reported."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetKey,
    MetadataValue,
    Output,
)

from atlas_dagster.dagster_internals import check_output_name


@dataclass(frozen=True)
class CheckOutcome:
    check_name: str
    passed: bool
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)


def to_evaluation(
    asset_key: AssetKey, partition_key: str, outcome: CheckOutcome
) -> AssetCheckEvaluation:
    """A per-partition evaluation: AssetCheckResult reads the step's single partition key, which a
    ranged run does not have, so the evaluation names its partition itself."""
    return AssetCheckEvaluation(
        asset_key=asset_key,
        check_name=outcome.check_name,
        passed=outcome.passed,
        metadata={k: _metadata_value(v) for k, v in outcome.metadata.items()},
        target_materialization_data=None,
        severity=AssetCheckSeverity.ERROR,
        description=outcome.description,
        blocking=False,
        partition=partition_key,
    )


def check_outputs(context: AssetExecutionContext) -> Iterator[Output]:
    """The step's selected checks, reported as done: yield after their per-partition evaluations.

    Dagster expects one output per selected check of a step. For an AssetCheckResult it yields
    that output itself (Output(None) next to the evaluation, in its step execution's
    `_process_user_event`, dagster 1.13.27); evaluations yielded
    directly carry no output, so without these the step logs "did not yield or return expected
    outputs". One output per check whatever the number of tenant-days: the results stay the
    per-partition evaluations.
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
