"""The one home of Dagster internals: names and instance methods with no public API in 1.13.

Checked against dagster 1.13.27 (pinned in pyproject.toml). Everything here is a private module
path or an instance/storage method that Dagster does not document as public; an upgrade that
moves one of them fails `atlas_dagster_tests/test_dagster_internals.py` loudly, and nothing else
in atlas_dagster imports `dagster._…`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from dagster import AssetCheckKey, AssetKey, AssetsDefinition, DagsterInstance
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    BACKFILL_ID_TAG,
    PARTITION_NAME_TAG,
    PRIORITY_TAG,
)

CHECKED_AGAINST = "1.13.27"

# Read by Dagster's event log storage in the process that creates a run (the property
# supports_partition_subset_in_asset_materialization_planned_events): set to 1, a run records one
# "materialization planned" event per asset holding its partition subset instead of one event per
# partition. Part of the fleet's production configuration (README "Production instance");
# documented nowhere outside Dagster's code.
SUBSET_PLANNED_EVENTS_ENV = "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"

__all__ = [
    "ASSET_PARTITION_RANGE_END_TAG",
    "ASSET_PARTITION_RANGE_START_TAG",
    "BACKFILL_ID_TAG",
    "CHECKED_AGAINST",
    "PARTITION_NAME_TAG",
    "PRIORITY_TAG",
    "SUBSET_PLANNED_EVENTS_ENV",
    "BulkActionStatus",
    "backfill_is_requested",
    "backfill_target_partitions",
    "check_output_name",
    "claim_pool_slot",
    "coordinator_instance",
    "free_pool_slot",
    "instance_database_connection",
    "kv_get",
    "kv_set",
    "pool_info",
    "set_pool_limit",
    "supports_pools",
]


def supports_pools(instance: DagsterInstance) -> bool:
    """False on an ephemeral instance, which cannot hold pool limits."""
    return bool(instance.event_log_storage.supports_global_concurrency_limits)


def pool_info(instance: DagsterInstance, pool: str) -> Any:
    """The pool's ConcurrencyKeyInfo: .limit, .using_default_limit, .slot_count, …"""
    return instance.event_log_storage.get_concurrency_info(pool)


def set_pool_limit(instance: DagsterInstance, pool: str, limit: int) -> None:
    instance.event_log_storage.set_concurrency_slots(pool, limit)


def claim_pool_slot(
    instance: DagsterInstance, pool: str, run_id: str, step_key: str, priority: int
) -> bool:
    """One non-blocking claim; True when the slot is ours (a pending claim keeps its place)."""
    claim = instance.event_log_storage.claim_concurrency_slot(pool, run_id, step_key, priority)
    return bool(claim.is_claimed)


def free_pool_slot(instance: DagsterInstance, run_id: str, step_key: str) -> None:
    """Frees the step's slot, or withdraws its pending claim."""
    instance.event_log_storage.free_concurrency_slot_for_step(run_id, step_key)


@contextlib.contextmanager
def instance_database_connection(instance: DagsterInstance) -> Iterator[Any]:
    """A SQLAlchemy connection to the instance's index database (SQLite or PostgreSQL), or None
    when its event log storage is not SQL-backed."""
    connect = getattr(instance.event_log_storage, "index_connection", None)
    if connect is None:
        yield None
        return
    with connect() as connection:
        yield connection


def backfill_is_requested(instance: DagsterInstance, backfill_id: str) -> bool:
    """True while the backfill is still submitting runs (status REQUESTED)."""
    backfill = instance.get_backfill(backfill_id)
    return backfill is not None and backfill.status == BulkActionStatus.REQUESTED


def backfill_target_partitions(
    instance: DagsterInstance, backfill_id: str
) -> Mapping[AssetKey, Any] | None:
    """The partitions subset an asset backfill targets, per asset; None if it is not one."""
    backfill = instance.get_backfill(backfill_id)
    if backfill is None or backfill.asset_backfill_data is None:
        return None
    return backfill.asset_backfill_data.target_subset.partitions_subsets_by_asset_key


def coordinator_instance(coordinator: Any) -> DagsterInstance:
    """The instance a run coordinator belongs to (held in a private weakref property)."""
    return coordinator._instance


def check_output_name(assets_def: AssetsDefinition, check_key: AssetCheckKey) -> str:
    """The op output Dagster expects for a check of this step (not a public method in 1.13)."""
    return assets_def.get_output_name_for_asset_check_key(check_key)


def kv_get(instance: DagsterInstance, keys: set[str]) -> dict[str, str]:
    """Values of the instance's key-value store (the daemons' cursor storage: the run storage's
    kvs table, shared by every process of the instance, SQLite or PostgreSQL)."""
    return dict(instance.daemon_cursor_storage.get_cursor_values(keys))


def kv_set(instance: DagsterInstance, pairs: Mapping[str, str]) -> None:
    instance.daemon_cursor_storage.set_cursor_values(dict(pairs))
