"""The one home of Dagster internals: names and instance methods with no public API in 1.13.

Checked against dagster 1.13.27 (pinned in pyproject.toml). Everything here is a private module
path or an instance/storage method that Dagster does not document as public; an upgrade that
moves one of them fails `atlas_dagster_tests/test_dagster_internals.py` loudly, and nothing else
in atlas_dagster imports `dagster._…`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    DagsterEvent,
    DagsterEventType,
    DagsterInstance,
    EventLogEntry,
    OpExecutionContext,
)
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from dagster._core.storage.event_log.schema import (
    AssetCheckExecutionsTable,
    SqlEventLogStorageTable,
)
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    BACKFILL_ID_TAG,
    PARTITION_NAME_TAG,
    PRIORITY_TAG,
    WILL_RETRY_TAG,
)
from sqlalchemy import bindparam, select

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
    "WILL_RETRY_TAG",
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
    "check_evaluation_entry",
    "pool_info",
    "set_pool_limit",
    "store_check_evaluations",
    "supports_pools",
    "target_materialization",
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


# --------------------------------------------------------------------------- check evaluations
# Dagster 1.13.27 stores every event on its own: SqliteEventLogStorage.store_event opens a new
# SQLAlchemy engine and commits once in the run's shard and twice in the index shard for a check
# evaluation (the event, then its asset_check_executions row); no storage batches them
# (BATCH_WRITABLE_EVENTS leaves ASSET_CHECK_EVALUATION out, and the SQL storages' base
# store_event_batch is a loop of store_event). Measured: 11-13 ms an evaluation on SQLite here,
# 13,152 of them for verify over 3 years. store_check_evaluations writes the same rows, a batch to
# a transaction per database.


def target_materialization(
    storage_id: int, run_id: str, timestamp: float
) -> AssetCheckEvaluationTargetMaterializationData:
    """What an evaluation names as the materialization it checked (Dagster fills it in itself
    for an AssetCheckResult of a single-partition step; a ranged step must say it)."""
    return AssetCheckEvaluationTargetMaterializationData(
        storage_id=storage_id, run_id=run_id, timestamp=timestamp
    )


def check_evaluation_entry(
    context: AssetExecutionContext | OpExecutionContext, evaluation: AssetCheckEvaluation
) -> EventLogEntry:
    """The event log entry `context.log_event(evaluation)` stores, built without storing it
    (DagsterEvent.asset_check_evaluation and DagsterEvent.from_step, then the log manager's
    entry, in dagster 1.13.27)."""
    step_context = context.op_execution_context.get_step_execution_context()
    outcome = "passed." if evaluation.passed else "did not pass."
    described = (
        "" if evaluation.description is None else f" Description: '{evaluation.description}'"
    )
    message = (
        f"Asset check '{evaluation.check_name}' on "
        f"'{evaluation.asset_key.to_user_string()}' {outcome}{described}"
    )
    event = DagsterEvent(
        event_type_value=DagsterEventType.ASSET_CHECK_EVALUATION.value,
        job_name=step_context.job_name,
        step_handle=step_context.step.handle,
        node_handle=step_context.step.node_handle,
        step_kind_value=step_context.step.kind.value,
        logging_tags=step_context.event_tags,
        event_specific_data=evaluation,
        message=message,
        pid=os.getpid(),
    )
    return EventLogEntry(
        error_info=None,
        level=logging.DEBUG,
        user_message=message,
        run_id=step_context.run_id,
        timestamp=time.time(),
        step_key=step_context.step.key,
        job_name=step_context.job_name,
        dagster_event=event,
    )


def store_check_evaluations(instance: DagsterInstance, entries: Sequence[EventLogEntry]) -> None:
    """Stores check evaluation entries of one run as store_event stores each (the event in the
    run's log, its copy in the index, its asset_check_executions row), in one transaction per
    database, each entry serialized once (store_event serializes it three times). Another
    storage (in memory, a cloud one) gets them one by one, as usual."""
    if not entries:
        return
    storage = instance.event_log_storage
    if not isinstance(storage, SqlEventLogStorage):
        for entry in entries:
            instance.handle_new_event(entry)
        return
    rows = [storage._event_to_row(entry) for entry in entries]
    if isinstance(storage, SqliteEventLogStorage):  # the run's shard, then the index
        with storage.run_connection(entries[0].run_id) as connection:
            connection.execute(SqlEventLogStorageTable.insert(), rows)
        with storage.index_connection() as connection:
            _index_check_evaluations(connection, entries, rows)
    else:  # one database: PostgreSQL, MySQL
        with storage.index_transaction() as connection:
            _index_check_evaluations(connection, entries, rows)


def _index_check_evaluations(
    connection: Any, entries: Sequence[EventLogEntry], rows: Sequence[dict[str, Any]]
) -> None:
    """The events' copies in the index (their storage ids back, in order), then their
    asset_check_executions rows: SqlEventLogStorage._update_asset_check_evaluation (1.13.27) for
    many at once. The run's planned row of a check and partition takes its result; a result
    with no planned row gets a row of its own. A statement per kind, each for the whole batch."""
    events = SqlEventLogStorageTable
    inserted = connection.execute(
        events.insert().returning(events.c.id, sort_by_parameter_order=True), list(rows)
    )
    event_ids = [int(event_id) for (event_id,) in inserted]
    executions = [
        _check_execution(entry, row["event"], event_id)
        for entry, row, event_id in zip(entries, rows, event_ids, strict=True)
    ]
    planned = _planned_rows(connection, entries[0].run_id, executions)
    table = AssetCheckExecutionsTable
    updates, inserts = [], []
    for execution in executions:
        key = (execution["b_asset_key"], execution["b_check_name"], execution["b_partition"])
        row_id = planned.get(key)
        if row_id is None:
            inserts.append(execution)
        else:
            updates.append(execution | {"b_id": row_id})
    if updates:
        connection.execute(
            table.update()
            .where(table.c.id == bindparam("b_id"))
            .values({name: bindparam(f"b_{name}") for name in _EXECUTION_RESULT}),
            updates,
        )
    if inserts:
        columns = ("asset_key", "check_name", "run_id", "partition", *_EXECUTION_RESULT)
        connection.execute(
            table.insert().values({name: bindparam(f"b_{name}") for name in columns}), inserts
        )


# The asset_check_executions columns an evaluation sets on its run's planned row (bound as
# b_<column>: SQLAlchemy keeps a column's own name for itself in SET and VALUES).
_EXECUTION_RESULT = (
    "execution_status",
    "evaluation_event",
    "evaluation_event_timestamp",
    "evaluation_event_storage_id",
    "materialization_event_storage_id",
)


def _check_execution(entry: EventLogEntry, serialized: str, event_id: int) -> dict[str, Any]:
    evaluation = entry.get_dagster_event().asset_check_evaluation_data
    target = evaluation.target_materialization_data
    status = (
        AssetCheckExecutionRecordStatus.SUCCEEDED
        if evaluation.passed
        else AssetCheckExecutionRecordStatus.FAILED
    )
    return {
        "b_asset_key": evaluation.asset_key.to_string(),
        "b_check_name": evaluation.check_name,
        "b_run_id": entry.run_id,
        "b_partition": evaluation.partition,
        "b_execution_status": status.value,
        "b_evaluation_event": serialized,  # serialize_value(entry), as Dagster stores it
        "b_evaluation_event_timestamp": dt.datetime.fromtimestamp(entry.timestamp, dt.UTC).replace(
            tzinfo=None
        ),
        "b_evaluation_event_storage_id": event_id,
        "b_materialization_event_storage_id": target.storage_id if target else None,
    }


def _planned_rows(
    connection: Any, run_id: str, executions: Sequence[dict[str, Any]]
) -> dict[tuple[str, str, str | None], int]:
    """The run's asset_check_executions rows for the batch's checks: (asset key, check name,
    partition) -> row id (the unique index idx_asset_check_executions_unique covers the read)."""
    table = AssetCheckExecutionsTable
    found = {}
    checks = {(e["b_asset_key"], e["b_check_name"]) for e in executions}
    for asset_key, check_name in sorted(checks):
        result = connection.execute(
            select(table.c.partition, table.c.id).where(
                table.c.asset_key == asset_key,
                table.c.check_name == check_name,
                table.c.run_id == run_id,
            )
        )
        found |= {(asset_key, check_name, partition): int(i) for partition, i in result}
    return found
