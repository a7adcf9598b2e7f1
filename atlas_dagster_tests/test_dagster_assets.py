"""Raw assets materialized through a real Dagster instance: in-process and by the dagster CLI."""

import datetime as dt
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dagster import (
    AssetKey,
    DagsterInstance,
    ExecuteInProcessResult,
    instance_for_test,
    materialize,
)

from atlas_dagster.assets.raw import raw_assets
from atlas_dagster.cli.demo_data import GENERATORS, write_day
from atlas_dagster.partitions import partitions_for
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster_tests.conftest import log_row
from testkit.dagster_stack import DAGSTER_YAML
from testkit.load_support import run_resources

pytestmark = pytest.mark.slow  # seconds per test: real loads and runs

DAY = dt.date(2026, 11, 5)


def _write(tenant, domain: str, day: dt.date = DAY) -> int:
    generate, _ = GENERATORS[domain]
    rows = generate(random.Random(f"{tenant.key}-{day}"), tenant, day, 100)
    write_day(tenant, domain, day, rows)
    return len(rows)


def _materialize_casino(clickhouse, tenant, instance, **options) -> ExecuteInProcessResult:
    return materialize(
        raw_assets([tenant], partitions_for([tenant])),
        selection=["tbt_raw_events_casino"],
        instance=instance,
        resources=run_resources(clickhouse),
        partition_key=f"{DAY}|{tenant.key}",
        **options,
    )


def test_partition_materializes_with_metadata(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",))
    expected = _write(tenant, "casino")
    with instance_for_test() as instance:
        result = _materialize_casino(clickhouse, tenant, instance)
        assert result.success
        [event] = result.asset_materializations_for_node("raw_events")
        metadata = {k: v.value for k, v in event.metadata.items()}
        assert metadata["rows_loaded"] == expected and metadata["files"] == 2
        assert metadata["clickhouse_query_id"].startswith("atlas-")
        assert {"bytes", "s3_path", "duration_seconds"} <= set(metadata)
        assert log_row(clickhouse, tenant, "casino", DAY)["run_id"] == result.run_id


def test_failed_day_marks_the_partition_failed(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",))
    with instance_for_test() as instance:
        result = _materialize_casino(clickhouse, tenant, instance, raise_on_error=False)
        assert not result.success
    entry = log_row(clickhouse, tenant, "casino", DAY)
    assert entry["status"] == "failed" and "no Parquet files" in entry["error_message"]


def test_dagster_cli_materializes_a_partition_in_its_own_process(tmp_path: Path) -> None:
    """The documented command, as a separate process holding the embedded engine."""
    exports = tmp_path / "exports"
    tenants_yaml = tmp_path / "tenants.yaml"
    tenants_yaml.write_text(
        yaml.safe_dump(
            {
                "tenants": [
                    {
                        "organization_id": "cli",
                        "brand_id": "main",
                        "source": f"file://{exports}",
                        "start_date": "2026-11-01",
                        "end_date": "2026-11-07",
                        "domains": ["casino"],
                    }
                ]
            }
        )
    )
    from atlas_dagster.tenants import load_tenants

    [tenant] = load_tenants(tenants_yaml)
    expected = _write(tenant, "casino")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML.read_text())
    dsn = f"chdb://{tmp_path / 'clickhouse'}"
    env = os.environ | {
        "DAGSTER_HOME": str(home),
        "ATLAS_TENANTS_FILE": str(tenants_yaml),
        "ATLAS_CLICKHOUSE_DSN": dsn,
    }
    completed = subprocess.run(
        [
            str(Path(sys.executable).parent / "dagster"),
            "asset",
            "materialize",
            "-m",
            "atlas_dagster.definitions",
            "--select",
            "tbt_raw_events_casino",
            "--partition",
            f"{DAY}|cli.main",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert re.search(r"RUN_SUCCESS", completed.stderr + completed.stdout)
    with DagsterInstance.from_config(str(home)) as instance:
        records = instance.get_latest_materialization_event(AssetKey("tbt_raw_events_casino"))
        assert records is not None
    assert log_row(ClickHouseResource(dsn=dsn), tenant, "casino", DAY)["rows_loaded"] == expected
