"""The gold automation through the real daemon and code server: cursor kept between ticks,
gold of a landed tenant-day requested once within two ticks, nothing on idle ticks."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from dagster import AssetMaterialization, DagsterInstance, RunsFilter

from atlas_dagster.core.tags import BACKFILL_ID_TAG
from atlas_dagster.dagster_internals import backfill_target_partitions
from atlas_dagster.domains import DOMAINS
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.orchestration.automation import GOLD_SENSOR_NAME

pytestmark = pytest.mark.e2e  # a real dagster dev / daemon

REPO = Path(__file__).resolve().parents[1]
INTERVAL = 5


def _gold_requests(instance: DagsterInstance) -> list[tuple[str, str]]:
    """(gold asset, partition) of every request: a backfill for several, a run for one."""
    requests = []
    for backfill in instance.get_backfills():
        targets = backfill_target_partitions(instance, backfill.backfill_id) or {}
        for key, subset in targets.items():
            requests += [(key.to_user_string(), str(p)) for p in subset.get_partition_keys()]
    for record in instance.get_run_records(RunsFilter()):
        run = record.dagster_run
        if BACKFILL_ID_TAG not in run.tags and "dagster/partition" in run.tags:
            requests += [
                (k.to_user_string(), run.tags["dagster/partition"])
                for k in run.asset_selection or ()
            ]
    return [r for r in requests if r[0] in GOLD_TABLES]


def _gold_ticks(instance: DagsterInstance, after: float) -> list[tuple[float, float]]:
    """(start, end) of the finished gold_after_raw ticks that ended after `after`."""
    for state in instance.all_instigator_state():
        if state.instigator_name == GOLD_SENSOR_NAME:
            ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id)
            return sorted(
                (t.timestamp, t.end_timestamp)
                for t in ticks
                if t.end_timestamp and t.end_timestamp >= after
            )
    return []


def _wait_ticks(instance: DagsterInstance, after: float, count: int) -> list[tuple[float, float]]:
    deadline = time.time() + 180
    while len(ticks := _gold_ticks(instance, after)) < count:
        assert time.time() < deadline, f"fewer than {count} gold_after_raw ticks in 180 s"
        time.sleep(0.5)
    return ticks


def test_the_daemon_requests_a_landed_tenant_day_once_within_two_ticks(tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = yaml.safe_load((REPO / "dagster.yaml").read_text())
    config["run_coordinator"]["config"]["max_concurrent_runs"] = 0  # requests stay queued
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    tenants = [
        {
            "organization_id": f"daemon{i}",
            "brand_id": "main",
            "source": f"file://{tmp_path}/x",
            "start_date": "2024-01-01",
            "end_date": "2026-11-30",
        }
        for i in range(3)
    ]
    (tmp_path / "tenants.yaml").write_text(yaml.safe_dump({"tenants": tenants}))
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "ATLAS_TENANTS_FILE": str(tmp_path / "tenants.yaml"),
        "ATLAS_CLICKHOUSE_DSN": f"chdb://{tmp_path / 'clickhouse'}",
        "ATLAS_AUTOMATION_SECONDS": str(INTERVAL),
    }
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        yaml.safe_dump(
            {
                "load_from": [
                    {
                        "python_module": {
                            "module_name": "atlas_dagster.definitions",
                            "working_directory": str(REPO),
                        }
                    }
                ]
            }
        )
    )
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", str(workspace)],
        env=env,
        cwd=REPO,
        stdout=(tmp_path / "daemon.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    os.environ["DAGSTER_HOME"] = str(home)
    try:
        with DagsterInstance.get() as instance:
            _wait_ticks(instance, 0, 2)  # idle ticks: nothing requested
            assert _gold_requests(instance) == []
            key = f"{dt.date(2024, 3, 5)}|daemon1.main"  # a day years back
            for domain in DOMAINS.values():
                instance.report_runless_asset_event(
                    AssetMaterialization(domain.raw_table, partition=key)
                )
            landed = time.time()
            deadline = time.time() + 180
            while len(_gold_requests(instance)) < 3:
                assert time.time() < deadline, "gold was not requested"
                time.sleep(0.5)
            requested = time.time()
            _wait_ticks(instance, requested, 3)  # the requesting tick, then two with nothing new
            # Ticks that ended after the raw landed and started before gold was seen requested.
            ticks_before = [t for t in _gold_ticks(instance, landed) if t[0] <= requested]
            assert sorted(_gold_requests(instance)) == [
                ("gold_ggr_daily", key),
                ("gold_transactions_daily", key),
                ("gold_users_daily", key),
            ]  # the liability waits for its 90-day window; each asset requested once
            assert 1 <= len(ticks_before) <= 2, (landed, requested, _gold_ticks(instance, 0))
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        os.environ.pop("DAGSTER_HOME", None)
