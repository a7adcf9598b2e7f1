"""Settings: every variable read and checked in one place (settings.py), a run's tunables taken
from the resource atlas_settings rather than from the environment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from dagster import EnvVar, asset, materialize

from atlas_dagster.resources.atlas_settings import RESOURCE_KEY, AtlasSettings
from atlas_dagster.settings import (
    LOAD_BOUNDS,
    LoadSettings,
    Settings,
    SettingsError,
    current_settings,
)

PACKAGE = Path(__file__).resolve().parents[1] / "atlas_dagster"


def test_the_defaults(tmp_path: Path) -> None:
    settings = Settings.from_env({"ATLAS_HOME": str(tmp_path)})
    home = tmp_path.resolve()
    assert settings.home == home
    assert settings.clickhouse_dsn == f"chdb://{home}/.atlas/clickhouse"
    assert settings.clickhouse_cluster is None
    assert settings.tenants_file == home / "tenants.yaml"
    assert settings.reports_location == f"{home}/.atlas/reports"
    assert settings.load == LoadSettings(
        parallel_inserts=3,
        ramp_up_days=3,
        retry_attempts=5,
        retry_base_seconds=2.0,
        retry_max_seconds=300.0,
        recovery_seconds=60.0,
        health_probe_seconds=10.0,
        health_query="",
        health_threshold=0.0,
        slot_wait_seconds=6 * 3600,
    )
    assert (settings.embedded_inflight_mb, settings.embedded_inflight_bytes) == (32, 32 << 20)
    assert settings.liability_lookback_days == 90
    assert (settings.stale_sweep_seconds, settings.automation_seconds) == (30, 30)
    assert settings.backfill_wait_seconds == 24 * 3600
    assert settings.report_cron == "0 6 * * *"
    assert settings.dagster_url == "http://127.0.0.1:3000"


def test_set_variables_are_parsed_and_blank_ones_are_unset() -> None:
    settings = Settings.from_env(
        {
            "ATLAS_MAX_PARALLEL_INSERTS": " 4 ",
            "ATLAS_RETRY_BASE_SECONDS": "0.2",
            "ATLAS_HEALTH_QUERY": "  SELECT 1  ",
            "ATLAS_RAMP_UP_DAYS": "   ",
            "ATLAS_CLICKHOUSE_CLUSTER": "main",
            "ATLAS_REPORTS_LOCATION": "s3://bucket/reports/",
        }
    )
    assert settings.load.parallel_inserts == 4 and settings.load.retry_base_seconds == 0.2
    assert settings.load.health_query == "SELECT 1" and settings.load.ramp_up_days == 3
    assert settings.clickhouse_cluster == "main"
    assert settings.reports_location == "s3://bucket/reports"


def test_every_bad_variable_is_named_with_its_value_and_range_at_once() -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(
            {
                "ATLAS_MAX_PARALLEL_INSERTS": "5",
                "ATLAS_RETRY_BASE_SECONDS": "soon",
                "ATLAS_STALE_SWEEP_SECONDS": "1.5",
                "ATLAS_CLICKHOUSE_CLUSTER": "a b",
                "ATLAS_REPORT_CRON": "daily",
            }
        )
    text = str(raised.value)
    assert (
        "ATLAS_MAX_PARALLEL_INSERTS=5 is refused: it must be between 1 and 4 (never more than 4 "
        "INSERTs in parallel" in text
    )
    assert "ATLAS_RETRY_BASE_SECONDS='soon' is not a number" in text
    assert "ATLAS_STALE_SWEEP_SECONDS='1.5' is not an integer" in text
    assert "ATLAS_CLICKHOUSE_CLUSTER='a b' is not a valid cluster name" in text
    assert "ATLAS_REPORT_CRON='daily' is not a five-field cron schedule" in text


def test_the_resource_wires_set_variables_as_env_vars_and_leaves_the_rest_at_default() -> None:
    environ = {
        "ATLAS_MAX_PARALLEL_INSERTS": "2",
        "ATLAS_HEALTH_QUERY": "SELECT 1",
        "ATLAS_RETRY_MAX_SECONDS": "7.5",
        "ATLAS_RAMP_UP_DAYS": "",
    }
    resource = AtlasSettings.wired(environ)
    assert resource.parallel_inserts.env_var_name == "ATLAS_MAX_PARALLEL_INSERTS"  # type: ignore[attr-defined]
    assert isinstance(resource.health_query, EnvVar)
    assert resource.health_query.env_var_name == "ATLAS_HEALTH_QUERY"
    # Dagster 1.13 has no float source: a float setting is wired as its parsed value.
    assert resource.retry_max_seconds == 7.5
    assert resource.ramp_up_days == 3 and resource.retry_attempts == 5
    with pytest.raises(SettingsError, match="ATLAS_RAMP_UP_DAYS=9 is refused"):
        AtlasSettings.wired({"ATLAS_RAMP_UP_DAYS": "9"})


def test_a_run_reads_its_tunables_from_the_resource_and_holds_them_to_their_bounds(
    monkeypatch,
) -> None:
    seen: list[LoadSettings] = []

    @asset
    def probe(atlas_settings: AtlasSettings) -> None:
        seen.append(atlas_settings.load_settings())

    monkeypatch.setenv("ATLAS_MAX_PARALLEL_INSERTS", "2")
    monkeypatch.setenv("ATLAS_BACKPRESSURE_RECOVERY_SECONDS", "0.3")
    wired = AtlasSettings.wired()
    assert materialize([probe], resources={RESOURCE_KEY: wired}).success
    assert (seen[-1].parallel_inserts, seen[-1].recovery_seconds) == (2, 0.3)
    # The run's value is the resource's (e.g. a launchpad override), checked like the variable.
    with pytest.raises(SettingsError, match="ATLAS_MAX_PARALLEL_INSERTS=6 is refused"):
        AtlasSettings(parallel_inserts=6).load_settings()
    assert set(AtlasSettings.model_fields) == {*LOAD_BOUNDS, "health_query"}


def test_current_settings_follow_a_changed_environment(monkeypatch) -> None:
    monkeypatch.setenv("ATLAS_BACKFILL_WAIT_SECONDS", "60")
    first = current_settings()
    assert first.backfill_wait_seconds == 60 and current_settings() is first
    monkeypatch.setenv("ATLAS_BACKFILL_WAIT_SECONDS", "90")
    assert current_settings().backfill_wait_seconds == 90


def _reads_an_atlas_variable(node: ast.AST) -> bool:
    """os.environ.get("ATLAS_…"), os.getenv("ATLAS_…") or os.environ["ATLAS_…"]."""
    if isinstance(node, ast.Call):
        name = ast.unparse(node.func)
        if name in ("os.environ.get", "os.getenv", "environ.get") and node.args:
            first = node.args[0]
            return isinstance(first, ast.Constant) and str(first.value).startswith("ATLAS_")
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("os.environ", "environ"):
        key = node.slice
        return isinstance(key, ast.Constant) and str(key.value).startswith("ATLAS_")
    return False


def test_only_settings_py_reads_atlas_variables() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "settings.py" or path.parent != PACKAGE
        for node in ast.walk(ast.parse(path.read_text()))
        if _reads_an_atlas_variable(node)
    ]
    assert offenders == []
