"""The code location: one DSN setting configures the resource and gold's automation shape."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetKey, AutomationCondition, EnvVar

from atlas_dagster.definitions import build_definitions
from atlas_dagster.orchestration.automation import GoldAfterRaw
from atlas_dagster_tests.dagster_stack import write_tenants

SERVER_DSN = "http://atlas:s3cret-pw@127.0.0.1:8123"


@pytest.fixture
def deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ATLAS_HOME holding tenants.yaml, and no DSN set: the defaults apply."""
    write_tenants(
        tmp_path / "tenants.yaml",
        [
            {
                "organization_id": "defs",
                "brand_id": "main",
                "source": "exports",
                "start_date": "2026-11-01",
                "end_date": "2026-11-03",
                "domains": ["casino"],
            }
        ],
    )
    for name in ("ATLAS_CLICKHOUSE_DSN", "ATLAS_TENANTS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ATLAS_HOME", str(tmp_path))
    return tmp_path


def _waits_for_raw_runs(condition: AutomationCondition) -> bool:
    """Whether gold waits for its tenant's whole raw run: its embedded-mode shape."""
    if isinstance(condition, GoldAfterRaw):
        return condition._embedded
    return any(_waits_for_raw_runs(child) for child in condition.children)


def _gold_condition(defs) -> AutomationCondition:
    return defs.resolve_asset_graph().get(AssetKey("gold_ggr_daily")).automation_condition


def test_embedded_by_default_everywhere(deployment: Path) -> None:
    defs = build_definitions()
    clickhouse = defs.resources["clickhouse"]
    assert clickhouse.dsn == f"chdb://{deployment.resolve()}/.atlas/clickhouse"
    assert _waits_for_raw_runs(_gold_condition(defs))


def test_a_server_dsn_is_an_env_var_and_makes_gold_server_shaped(
    deployment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATLAS_CLICKHOUSE_DSN", SERVER_DSN)
    defs = build_definitions()
    clickhouse = defs.resources["clickhouse"]
    assert isinstance(clickhouse.dsn, EnvVar) and clickhouse.dsn.env_var_name == (
        "ATLAS_CLICKHOUSE_DSN"
    )
    assert "s3cret" not in repr(clickhouse)  # what the UI shows of the resource's config
    assert not _waits_for_raw_runs(_gold_condition(defs))


def test_each_area_is_merged_into_the_code_location(deployment: Path) -> None:
    defs = build_definitions()
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"tbt_raw_events_casino", "gold_ggr_daily", "client_progress_report"} <= keys
    sensors = {s.name for s in defs.sensors or []}
    assert {"release_held_backfill_runs", "client_progress_reports_after_loads"} < sensors
    assert {s.name for s in defs.schedules or []} == {"client_progress_reports_daily"}
    assert defs.resolve_job_def("verify_gold")
    assert defs.executor is not None and defs.executor.name == "in_process"
