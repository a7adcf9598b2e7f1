"""Test and bench helpers: a tenants file, and `dagster dev` on a fresh instance and engine."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import yaml

from atlas_dagster.cli.dagster_api import DagsterApi
from atlas_dagster.cli.dagster_dev import DagsterStack, serve
from atlas_dagster.tenants import Tenant, load_tenants

REPO = Path(__file__).resolve().parent.parent
DAGSTER_YAML = REPO / "dagster.yaml"


def tenant_entry(tenant: Tenant) -> dict:
    return {
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "source": tenant.source,
        "start_date": tenant.start_date.isoformat(),
        "end_date": tenant.end_date.isoformat() if tenant.end_date else None,
        "domains": list(tenant.domains),
    }


def write_tenants(path: Path, tenants: Sequence[Tenant | Mapping]) -> Path:
    """A tenants file from Tenant objects or raw entries (raw ones may be deliberately invalid)."""
    entries = [tenant_entry(t) if isinstance(t, Tenant) else dict(t) for t in tenants]
    path.write_text(yaml.safe_dump({"tenants": entries}))
    return path


def isolated_env(
    work: Path,
    tenants_file: Path,
    extra_env: dict[str, str] | None = None,
    instance_yaml: str | None = None,
) -> dict:
    """A new DAGSTER_HOME (the project's dagster.yaml, or `instance_yaml`) and embedded engine
    under `work`."""
    home = work / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(instance_yaml or DAGSTER_YAML.read_text())
    return os.environ | {
        "DAGSTER_HOME": str(home),
        "ATLAS_HOME": str(work),
        "ATLAS_TENANTS_FILE": str(tenants_file),
        "ATLAS_CLICKHOUSE_DSN": f"chdb://{work / 'clickhouse'}",
        **(extra_env or {}),
    }


def cli_site(work: Path, monkeypatch, entry: Mapping) -> Tenant:
    """One tenant from its tenants-file `entry` (brand 'main' and exports under work/exports
    unless it says otherwise), a fresh DAGSTER_HOME (the project's dagster.yaml) and embedded
    engine under `work`, set in this process's environment as the CLI and Dagster read them
    (`monkeypatch`: pytest's, so that the test leaves the environment as it found it)."""
    defaults = {"brand_id": "main", "source": f"file://{work / 'exports'}"}
    tenants_file = write_tenants(work / "tenants.yaml", [defaults | dict(entry)])
    env = isolated_env(work, tenants_file)
    for name in ("DAGSTER_HOME", "ATLAS_TENANTS_FILE", "ATLAS_CLICKHOUSE_DSN"):
        monkeypatch.setenv(name, env[name])
    [tenant] = load_tenants(tenants_file)
    return tenant


@contextlib.contextmanager
def run_dagster_dev(
    work: Path,
    tenants_file: Path,
    extra_env: dict[str, str] | None = None,
    instance_yaml: str | None = None,
) -> Iterator[DagsterStack]:
    """Starts `dagster dev` on a fresh instance and engine under `work`; stops it after."""
    env = isolated_env(work, tenants_file, extra_env, instance_yaml)
    with serve(env, work / "dagster-dev.log") as stack:
        yield stack


def launch_like_the_ui(api: DagsterApi, partition_names: list[str], assets: list[str]) -> str:
    """The asset page's Materialize… dialog sends launchPartitionBackfill with these params;
    returns the backfill's id."""
    params = {
        "partitionNames": partition_names,
        "assetSelection": [{"path": [a]} for a in assets],
        "fromFailure": False,
        "tags": [],
    }
    result = api.call("launch_backfill", {"params": params})["launchPartitionBackfill"]
    assert result["__typename"] == "LaunchBackfillSuccess", result
    return result["backfillId"]
