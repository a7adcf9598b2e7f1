"""The set-up the README's commands rely on: system packages checked or installed, and a test run
that collects nothing failing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from atlas_dagster_tests.dagster_stack import REPO

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
    assert "missing Debian package(s): chromium postgresql" in missing.stderr
    assert "apt-get install -y chromium postgresql" in missing.stderr

    _executable(tmp_path / "usr/bin/chromium")
    only_postgres = _ensure(tmp_path)
    assert only_postgres.returncode == 1
    assert "missing Debian package(s): postgresql" in only_postgres.stderr

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
