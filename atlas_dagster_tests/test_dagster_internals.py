"""Fails loudly when a Dagster upgrade moves an internal that dagster_internals.py adapts."""

from __future__ import annotations

import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest
from dagster import (
    AssetCheckKey,
    AssetCheckSpec,
    AssetKey,
    AssetSpec,
    DagsterInstance,
    Output,
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
