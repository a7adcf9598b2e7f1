"""A check's outcome for one tenant-day, and its Dagster form (a partitioned check evaluation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dagster import AssetCheckEvaluation, AssetCheckSeverity, AssetKey, MetadataValue


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
