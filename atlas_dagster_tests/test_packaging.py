"""The package ships alone and whole: every folder is listed in pyproject, SQL is package data."""

from __future__ import annotations

import ast
import tomllib
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from atlas_dagster import sql
from testkit.dagster_stack import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
SQL_PACKAGE = "atlas_dagster.sql_files"


def _folders(root: Path, package: str) -> set[str]:
    found = {package}
    for path in root.rglob("*"):
        if path.is_dir() and path.name != "__pycache__":
            found.add(".".join([package, *path.relative_to(root).parts]))
    return found


def test_pyproject_lists_every_folder_of_the_package_and_of_sql() -> None:
    expected = _folders(REPO / "atlas_dagster", "atlas_dagster") | _folders(
        REPO / "sql", SQL_PACKAGE
    )
    listed = set(SETUPTOOLS["packages"])
    assert not expected - listed, (
        f"add {sorted(expected - listed)} to [tool.setuptools] packages in pyproject.toml, "
        "or the wheel will not ship them"
    )
    assert not listed - expected, f"{sorted(listed - expected)} no longer exist"
    assert SETUPTOOLS["package-dir"] == {SQL_PACKAGE: "sql"}


def _sql_files(node: Traversable, prefix: str = "") -> list[str]:
    found = []
    for child in node.iterdir():
        if child.is_dir():
            found += _sql_files(child, f"{prefix}{child.name}/")
        elif child.name.endswith(".sql"):
            found.append(f"{prefix}{child.name}")
    return found


def test_sql_is_read_as_package_data() -> None:
    on_disk = sorted(p.relative_to(REPO / "sql").as_posix() for p in (REPO / "sql").rglob("*.sql"))
    assert sorted(_sql_files(files(sql.SQL_PACKAGE))) == on_disk
    assert sql.schema_files() == [p for p in on_disk if p.startswith("schema/")]
    assert "INSERT INTO" in sql.text("queries/load_day.sql")


def test_production_code_never_imports_test_helpers_or_test_only_dependencies() -> None:
    test_only = {"atlas_dagster_tests", "testkit", "bench", "numpy", "pytest", "playwright"}
    offenders = []
    for path in (REPO / "atlas_dagster").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [
                f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] in test_only
            ]
    assert offenders == []


def test_settings_defaults_follow_atlas_home_not_the_package(tmp_path, monkeypatch) -> None:
    from atlas_dagster.settings import Settings, current_settings

    monkeypatch.delenv("ATLAS_CLICKHOUSE_DSN", raising=False)
    monkeypatch.delenv("ATLAS_TENANTS_FILE", raising=False)
    monkeypatch.delenv("ATLAS_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    for settings in (Settings.from_env(), current_settings()):
        assert settings.clickhouse_dsn == f"chdb://{tmp_path.resolve()}/.atlas/clickhouse"
        assert settings.tenants_file == tmp_path.resolve() / "tenants.yaml"
    home = tmp_path / "home"
    monkeypatch.setenv("ATLAS_HOME", str(home))
    for settings in (Settings.from_env(), current_settings()):
        assert settings.clickhouse_dsn == f"chdb://{home.resolve()}/.atlas/clickhouse"
        assert settings.tenants_file == home.resolve() / "tenants.yaml"
