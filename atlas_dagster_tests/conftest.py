"""Shared fixtures: one fresh embedded ClickHouse per test session, tenants with unique ids."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import Tenant

_ids = itertools.count()
# Markers that always mean a slow test (pyproject.toml registers them all).
SLOW_KINDS = ("e2e", "browser", "postgres")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(kind) for kind in SLOW_KINDS):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def chdb_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    dsn = f"chdb://{tmp_path_factory.mktemp('clickhouse') / 'data'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATLAS_CLICKHOUSE_DSN", dsn)
        yield dsn


@pytest.fixture(autouse=True, scope="session")
def no_developer_instance() -> Iterator[None]:
    """Tests never see the developer's DAGSTER_HOME: those that need an instance make their own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("DAGSTER_HOME", raising=False)
        yield


@pytest.fixture
def clickhouse(chdb_dsn: str) -> ClickHouseResource:
    return ClickHouseResource(dsn=chdb_dsn)


@pytest.fixture
def make_tenant(tmp_path: Path):
    """A tenant with ids no other test uses, its exports under tmp_path."""

    def _make(
        domains: tuple[str, ...] = ("user", "casino", "transactions", "sportsbook"),
        start: dt.date = dt.date(2026, 11, 1),
        end: dt.date = dt.date(2026, 11, 7),
    ) -> Tenant:
        n = next(_ids)
        return Tenant(f"org{n}", "main", f"file://{tmp_path / 'exports'}", start, end, domains)

    return _make


def scalar(clickhouse: ClickHouseResource, text: str, **parameters: object):
    with clickhouse.session() as client:
        return client.command(text, parameters=parameters)


def log_row(clickhouse: ClickHouseResource, tenant: Tenant, domain: str, day: dt.date) -> dict:
    with clickhouse.session() as client:
        result = client.query(
            "SELECT * FROM atlas.backfill_log FINAL WHERE organization_id = {o:String} "
            "AND brand_id = {b:String} AND domain = {d:String} AND partition_date = {p:Date}",
            parameters={"o": tenant.organization_id, "b": tenant.brand_id, "d": domain, "p": day},
        )
        rows = [dict(zip(result.column_names, r, strict=True)) for r in result.result_rows]
    return rows[0] if rows else {}
