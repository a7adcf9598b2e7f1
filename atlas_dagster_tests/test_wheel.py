"""The built wheel alone runs the product: installed into a fresh virtualenv outside the checkout
(non-editable, its own site-packages), from another directory it applies the schema, loads a
tenant-day through `dagster asset materialize` and reads it back."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from atlas_dagster.cli.demo_data import GENERATORS, write_day
from atlas_dagster.tenants import load_tenants
from testkit.dagster_stack import DAGSTER_YAML, REPO, write_tenants

pytestmark = pytest.mark.slow

DAY = dt.date(2026, 11, 2)
ROWS = 500
INSTALL_TIMEOUT_SECONDS = 900
# What the build reads: pyproject.toml names the package folders and maps sql/ into it.
SOURCES = ("pyproject.toml", "README.md", "atlas_dagster", "sql")


def _run(command: list, cwd: Path, env: Mapping[str, str], timeout: float = 300) -> tuple[str, str]:
    """(stdout, stderr) of a command that must succeed."""
    completed = subprocess.run(
        [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, f"{command} exited {completed.returncode}:\n{output[-4000:]}"
    return completed.stdout, completed.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pip wheel` of a clean copy of the sources, as a fresh clone has them: setuptools reuses
    an existing build/ folder, so a wheel built in a working checkout may carry stale modules."""
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, source / name)
    out = tmp_path_factory.mktemp("wheel")
    started = time.monotonic()
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", out, source], out, os.environ)
    print(f"\nwheel built in {time.monotonic() - started:.1f}s")
    [built] = out.glob("atlas_dagster-*.whl")
    return built


def test_the_wheel_holds_the_package_alone_and_every_sql_file(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {n.split("/", 1)[0] for n in names}
    assert {t for t in top_level if not t.endswith(".dist-info")} == {"atlas_dagster"}
    shipped = {n.removeprefix("atlas_dagster/sql_files/") for n in names if n.endswith(".sql")}
    on_disk = {p.relative_to(REPO / "sql").as_posix() for p in (REPO / "sql").rglob("*.sql")}
    assert shipped == on_disk
    assert not [n for n in names if "tests" in n or n.startswith("bench/")]
    print(f"\n{wheel.name}: {len(names)} entries, {len(shipped)} .sql files")


def test_installed_wheel_loads_a_tenant_day_from_another_directory(
    wheel: Path, tmp_path: Path, record_property
) -> None:
    venv = tmp_path / "venv"
    bin_dir = venv / "bin"
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ATLAS_", "DAGSTER_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    started = time.monotonic()
    # A new virtualenv with its own site-packages; dependencies come from the configured index
    # (and pip's cache), the package from the wheel only.
    _run([sys.executable, "-m", "venv", venv], tmp_path, clean)
    _run([bin_dir / "pip", "install", "-q", wheel], tmp_path, clean, INSTALL_TIMEOUT_SECONDS)
    install_seconds = time.monotonic() - started
    record_property("wheel_install_seconds", round(install_seconds, 1))
    print(f"\nvenv + wheel install: {install_seconds:.1f}s")

    # A deployment directory outside the checkout: its defaults (tenants.yaml, .atlas/) live here.
    deployment = tmp_path / "deployment"
    deployment.mkdir()
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML.read_text())
    env = clean | {"DAGSTER_HOME": str(home), "PATH": f"{bin_dir}:{clean['PATH']}"}
    tenants_file = write_tenants(
        deployment / "tenants.yaml",
        [
            {
                "organization_id": "wheel",
                "brand_id": "main",
                "source": "exports",  # relative to the tenants file
                "start_date": DAY.isoformat(),
                "end_date": DAY.isoformat(),
                "domains": ["casino"],
            }
        ],
    )
    [tenant] = load_tenants(tenants_file)
    rows = GENERATORS["casino"][0](random.Random(7), tenant, DAY, ROWS)
    write_day(tenant, "casino", DAY, rows)

    where, _ = _run(
        [bin_dir / "python", "-c", "import atlas_dagster; print(atlas_dagster.__file__)"],
        deployment,
        env,
    )
    assert where.strip().startswith(str(venv)), where
    probe = subprocess.run(
        [bin_dir / "python", "-c", "import atlas_dagster_tests"],
        cwd=deployment,
        env=env,
        capture_output=True,
    )
    assert probe.returncode != 0, "the test suite must not be installed with the package"

    assert "applied" in _run([bin_dir / "atlas-dagster", "init-db"], deployment, env)[0]
    log = "".join(
        _run(
            [
                bin_dir / "dagster",
                "asset",
                "materialize",
                "-m",
                "atlas_dagster.definitions",
                "--select",
                "tbt_raw_events_casino",
                "--partition",
                f"{DAY}|{tenant.key}",
            ],
            deployment,
            env,
        )
    )
    assert "RUN_SUCCESS" in log
    assert "expected outputs" not in log
    assert (deployment / ".atlas" / "clickhouse").is_dir(), "the default DSN is ./.atlas/clickhouse"

    command = [bin_dir / "atlas-dagster", "status", "--org", "wheel", "--brand", "main", "--json"]
    status = json.loads(_run(command, deployment, env)[0])
    [progress] = status["progress"]
    assert (progress["domain"], progress["days_done"], progress["total_rows"]) == (
        "casino",
        1,
        len(rows),
    )
    assert status["failures"] == []
