"""The code location: one DSN setting configures the resource and gold's automation shape."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetKey, AutomationCondition, EnvVar
from dagster._core.remote_representation.external_data import (
    RepositorySnap,
    ResourceConfigEnvVarSnap,
)

from atlas_dagster.definitions import build_definitions
from atlas_dagster.orchestration.automation import GoldAfterRaw
from atlas_dagster.settings import (
    CLUSTER_VARIABLE,
    EMBEDDED_INFLIGHT_MB,
    HEALTH_QUERY_VARIABLE,
    LOAD_BOUNDS,
    LoadSettings,
)
from testkit.dagster_stack import write_tenants

SERVER_DSN = "http://atlas:s3cret-pw@127.0.0.1:8123"
LOAD_VARIABLES = (
    *(bound.variable for bound in LOAD_BOUNDS.values()),
    HEALTH_QUERY_VARIABLE,
    CLUSTER_VARIABLE,
    EMBEDDED_INFLIGHT_MB.variable,
)


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


def _shown(defs, resource: str) -> dict[str, object]:
    """The resource's configured values as the UI's Resources page gets them."""
    snap = RepositorySnap.from_def(defs.get_repository_def())
    [found] = [r for r in snap.resources if r.name == resource]
    return dict(found.configured_values)


def test_the_runs_tunables_are_a_resource_showing_the_variables_that_are_set(
    deployment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in LOAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    defaults = build_definitions()
    assert defaults.resources["atlas_settings"].load_settings() == LoadSettings()
    # Runs read no setting from their environment: the ClickHouse fields are all configured.
    assert defaults.resources["clickhouse"].cluster == ""
    assert defaults.resources["clickhouse"].embedded_inflight_mb == 32
    shown = _shown(defaults, "atlas_settings")
    assert shown["parallel_inserts"] == "3" and shown["retry_max_seconds"] == "300.0"
    assert not [v for v in shown.values() if isinstance(v, ResourceConfigEnvVarSnap)]

    monkeypatch.setenv("ATLAS_MAX_PARALLEL_INSERTS", "2")
    monkeypatch.setenv("ATLAS_HEALTH_QUERY", "SELECT 1")
    monkeypatch.setenv("ATLAS_RETRY_MAX_SECONDS", "30")
    monkeypatch.setenv("ATLAS_EMBEDDED_INFLIGHT_MB", "8")
    monkeypatch.setenv("ATLAS_CLICKHOUSE_CLUSTER", "main")
    defs = build_definitions()
    shown = _shown(defs, "atlas_settings")
    assert shown["parallel_inserts"] == ResourceConfigEnvVarSnap(name="ATLAS_MAX_PARALLEL_INSERTS")
    assert shown["health_query"] == ResourceConfigEnvVarSnap(name="ATLAS_HEALTH_QUERY")
    assert shown["retry_max_seconds"] == "30.0"  # no float EnvVar in Dagster: its value
    clickhouse = _shown(defs, "clickhouse")
    assert clickhouse["embedded_inflight_mb"] == ResourceConfigEnvVarSnap(
        name="ATLAS_EMBEDDED_INFLIGHT_MB"
    )
    assert clickhouse["cluster"] == ResourceConfigEnvVarSnap(name="ATLAS_CLICKHOUSE_CLUSTER")
