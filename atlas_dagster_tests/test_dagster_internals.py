"""Fails loudly when a Dagster upgrade moves an internal that dagster_internals.py adapts."""

from __future__ import annotations

import subprocess
import warnings
from importlib.metadata import version
from pathlib import Path

import pytest
from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetCheckSpec,
    AssetKey,
    AssetMaterialization,
    AssetSpec,
    DagsterEventType,
    DagsterInstance,
    MetadataValue,
    Output,
    PreviewWarning,
    StaticPartitionsDefinition,
    materialize,
    multi_asset,
)

from atlas_dagster import dagster_internals as internals

PACKAGE = Path(internals.__file__).resolve().parent


def test_checked_against_the_installed_dagster() -> None:
    assert version("dagster") == internals.CHECKED_AGAINST, (
        f"dagster {version('dagster')} is installed but dagster_internals.py was checked against "
        f"{internals.CHECKED_AGAINST}: re-check every adapter there, then update CHECKED_AGAINST"
    )


def test_only_the_adapter_imports_private_dagster_modules() -> None:
    found = subprocess.run(
        ["grep", "-rlE", r"^\s*(from|import)\s+dagster\._", str(PACKAGE)],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert [Path(p).name for p in found] == ["dagster_internals.py"]


def test_pool_adapters_work_on_a_persistent_instance(tmp_path: Path) -> None:
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        assert internals.supports_pools(instance)
        internals.set_pool_limit(instance, "p", 1)
        assert internals.pool_info(instance, "p").limit == 1
        assert internals.claim_pool_slot(instance, "p", "run-a", "step", 0)
        assert not internals.claim_pool_slot(instance, "p", "run-b", "step", 0)
        internals.free_pool_slot(instance, "run-a", "step")
        assert internals.claim_pool_slot(instance, "p", "run-b", "step", 0)
        assert internals.backfill_target_partitions(instance, "no-such-backfill") is None
        assert not internals.backfill_is_requested(instance, "no-such-backfill")


def test_the_subset_planned_events_switch_is_read_by_the_event_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        storage = instance.event_log_storage
        monkeypatch.delenv(internals.SUBSET_PLANNED_EVENTS_ENV, raising=False)
        assert not storage.supports_partition_subset_in_asset_materialization_planned_events
        monkeypatch.setenv(internals.SUBSET_PLANNED_EVENTS_ENV, "1")
        assert storage.supports_partition_subset_in_asset_materialization_planned_events


def test_check_output_name_is_an_output_of_the_step() -> None:
    @multi_asset(specs=[AssetSpec("a")], check_specs=[AssetCheckSpec("c", asset="a")])
    def step():
        yield Output(None, output_name="a")

    name = internals.check_output_name(step, AssetCheckKey(AssetKey("a"), "c"))
    assert name in step.op.output_dict


# --------------------------------------------------------------------------- check evaluations


def _checked_asset(batched: bool):
    """A partitioned asset whose check is reported per partition, failing on "b": through
    context.log_event (Dagster's own path, one event at a time) or through the batch adapter."""
    partitions = StaticPartitionsDefinition(["a", "b", "c"])
    with warnings.catch_warnings():  # partitioned checks are a preview in dagster 1.13
        warnings.simplefilter("ignore", PreviewWarning)
        check_spec = AssetCheckSpec("k", asset="t", partitions_def=partitions)

    @multi_asset(
        specs=[AssetSpec("t", partitions_def=partitions)], check_specs=[check_spec], can_subset=True
    )
    def step(context):  # noqa: ANN001  (a string annotation is refused by Dagster)
        for key in context.partition_keys:
            yield AssetMaterialization("t", partition=key, metadata={"n": 1})
        instance = context.instance
        found = instance.fetch_materializations(AssetKey("t"), limit=10).records
        latest = {r.partition_key: r for r in reversed(found)}
        evaluations = [
            AssetCheckEvaluation(
                asset_key=AssetKey("t"),
                check_name="k",
                passed=key != "b",
                partition=key,
                description=f"checked {key}",
                metadata={"rows": MetadataValue.int(3)},
                target_materialization_data=internals.target_materialization(
                    latest[key].storage_id, latest[key].run_id, latest[key].timestamp
                ),
            )
            for key in context.partition_keys
        ]
        if batched:
            entries = [internals.check_evaluation_entry(context, e) for e in evaluations]
            internals.store_check_evaluations(instance, entries)
        else:
            for evaluation in evaluations:
                context.log_event(evaluation)
        yield Output(None, output_name=internals.check_output_name(step, CHECK))

    return step


CHECK = AssetCheckKey(AssetKey("t"), "k")


def _stored(instance: DagsterInstance, batched: bool) -> dict[str, object]:
    """What Dagster's readers (the run log, the check's history, its partition health) see of
    one ranged run's check evaluations."""
    result = materialize(
        [_checked_asset(batched)],
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": "a",
            "dagster/asset_partition_range_end": "c",
        },
    )
    assert result.success
    logged = instance.all_logs(result.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
    events = [e.get_dagster_event() for e in logged]
    history = instance.event_log_storage.get_asset_check_execution_history(CHECK, limit=10)
    infos = instance.event_log_storage.get_asset_check_partition_info([CHECK])
    return {
        "run log": sorted(
            (
                e.event_specific_data.partition,
                e.event_specific_data.passed,
                e.event_specific_data.description,
                e.message,
                e.step_key,
                e.event_type_value,
                e.step_kind_value,
                str(e.node_handle),
                tuple(sorted(k for k in e.logging_tags)),
                entry.level,
            )
            for e, entry in zip(events, logged, strict=True)
        ),
        "history": sorted(
            (r.partition, r.status.value, r.event.timestamp > 0)
            for r in history
            if r.run_id == result.run_id
        ),
        "partition health": sorted(
            (i.partition_key, i.latest_execution_status.value, i.is_current) for i in infos
        ),
    }


def _equal_either_way(make_instance) -> None:
    with make_instance("log_event") as instance:
        by_dagster = _stored(instance, batched=False)
    with make_instance("batched") as instance:
        batched = _stored(instance, batched=True)
    assert batched == by_dagster
    assert by_dagster["partition health"] == [
        ("a", "SUCCEEDED", True),
        ("b", "FAILED", True),
        ("c", "SUCCEEDED", True),
    ]


def test_batched_check_evaluations_read_back_as_dagsters_own_on_sqlite(tmp_path: Path) -> None:
    def instance(name: str):
        (tmp_path / name).mkdir()
        return DagsterInstance.local_temp(str(tmp_path / name))

    _equal_either_way(instance)


@pytest.mark.postgres
def test_batched_check_evaluations_read_back_as_dagsters_own_on_postgres(tmp_path: Path) -> None:
    from testkit.postgres_server import (
        instance_at,
        postgres_instance_yaml,
        postgres_server,
    )

    with postgres_server() as server:

        def instance(name: str):
            home = tmp_path / name
            home.mkdir()
            (home / "dagster.yaml").write_text(postgres_instance_yaml())
            return instance_at(home, server.env)

        # Both instances share the server's database: the second run's rows sit beside the
        # first's, so each is read by its own run.
        _equal_either_way(instance)
