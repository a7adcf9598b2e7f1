"""The set-up the README's commands rely on: system packages checked or installed, and a test run
that collects nothing failing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from testkit.dagster_stack import REPO

ENSURE = REPO / "scripts" / "ensure-system-deps"


def _ensure(root: Path) -> subprocess.CompletedProcess:
    env = os.environ | {"ENSURE_SYSTEM_DEPS_ROOT": str(root)}
    return subprocess.run([ENSURE], env=env, capture_output=True, text=True, timeout=60)


def _executable(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


def test_missing_system_packages_are_named_with_the_command_to_install_them(tmp_path) -> None:
    missing = _ensure(tmp_path)
    assert missing.returncode == 1
    every = "chromium postgresql openjdk-17-jre-headless"
    assert f"missing Debian package(s): {every}" in missing.stderr
    assert f"apt-get install -y {every}" in missing.stderr

    _executable(tmp_path / "usr/bin/chromium")
    _executable(tmp_path / "usr/lib/jvm/java-17-openjdk-amd64/bin/java")
    only_postgres = _ensure(tmp_path)
    assert only_postgres.returncode == 1
    assert "missing Debian package(s): postgresql\n" in only_postgres.stderr

    for binary in ("initdb", "postgres"):
        _executable(tmp_path / f"usr/lib/postgresql/15/bin/{binary}")
    present = _ensure(tmp_path)
    assert (present.returncode, present.stderr) == (0, "")


@pytest.mark.slow  # a nested make: ruff and a whole collection
def test_a_test_run_that_collects_nothing_fails() -> None:
    completed = subprocess.run(
        ["make", "-s", "test-fast", "PYTEST_ARGS=-k no_test_is_named_like_this"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode != 0
    assert "pytest collected no tests: a failure" in completed.stderr


CHECK_IMPORTS = REPO / "scripts" / "check-imports"


def _check_imports(package: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["python3", CHECK_IMPORTS, package], capture_output=True, text=True, timeout=60
    )


def _module(package: Path, dotted: str, source: str) -> None:
    path = package.joinpath(*dotted.split(".")).with_suffix(".py")
    for folder in [package, *list(path.relative_to(package).parents)[:-1][::-1]]:
        (package / folder).mkdir(parents=True, exist_ok=True)
        (package / folder / "__init__.py").touch()
    path.write_text(source)


def test_the_package_imports_only_go_down() -> None:
    result = _check_imports(REPO / "atlas_dagster")
    assert result.returncode == 0, result.stderr
    assert "0 problem(s)" in result.stderr


def test_an_upward_import_and_a_cycle_are_named(tmp_path) -> None:
    package = tmp_path / "atlas_dagster"
    _module(package, "core.workers", "from atlas_dagster.loading import inbound\n")
    _module(package, "loading.inbound", "X = 1\n")
    _module(package, "cli.main", "def main():\n    from atlas_dagster.cli import demo\n")
    _module(package, "cli.demo", "from atlas_dagster.cli.main import main\n")
    _module(package, "orchestration.run_coordinator", "X = 1\n")
    _module(
        package,
        "orchestration.raw_run",
        "from atlas_dagster.orchestration import run_coordinator\n",
    )
    result = _check_imports(package)
    assert result.returncode == 1
    assert "core/workers.py:1: atlas_dagster.core.workers (layer core) imports " in result.stderr
    assert "a higher layer (loading)" in result.stderr
    assert "import cycle: atlas_dagster.cli.demo <-> atlas_dagster.cli.main" in result.stderr
    assert (
        "raw_run imports atlas_dagster.orchestration.run_coordinator, which only" in result.stderr
    )
    assert "3 problem(s)" in result.stderr
