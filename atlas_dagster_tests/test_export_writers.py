"""Exports written by the tools clients use — DuckDB, polars, pandas (pyarrow and fastparquet
engines) — and by pyarrow in the forms no tool here writes by itself (INT96 with nanoseconds,
DECIMAL(38,4) without statistics, a day in padded and unpadded folders) load exactly through a
ranged run, and their gold equals pyarrow's computation to the cent. Real Spark:
test_spark_exports.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import instance_for_test

from atlas_dagster.cli.demo_data import arrow_table
from atlas_dagster.cli.verify import stored_evaluations
from atlas_dagster.domains import DOMAINS
from atlas_dagster.gold.replay import replay_day
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.loading.day_load import count_day
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.tenants import Tenant
from atlas_dagster_tests.conftest import log_row, scalar
from testkit import gold_reference as reference
from testkit.export_writers import (
    DAYS,
    EMPTY_DAY_WRITER,
    NANOSECOND_WRITERS,
    ROWS,
    WRITERS,
)
from testkit.gold_support import assert_gold_to_the_cent, generated, materialize_range

pytestmark = pytest.mark.slow  # a ranged run of 2 days x 4 domains and gold per writer

LOOKBACK = 90


def _load(clickhouse, tenant: Tenant):
    """The run's result and the check evaluations it stored (in batches: not in the result)."""
    with instance_for_test() as instance:
        result = materialize_range(clickhouse, tenant, list(DOMAINS), instance, DAYS[0], DAYS[-1])
        return result, stored_evaluations(instance, result.run_id)


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_each_writers_export_loads_exactly_and_gold_matches(
    clickhouse, tmp_path: Path, writer: str
) -> None:
    n = next(_ids)
    tenant = Tenant(
        f"writer{n}", "main", f"file://{tmp_path / writer}", DAYS[0], DAYS[-1], tuple(DOMAINS)
    )
    rows = 4_500 if writer == "duckdb" else ROWS
    for domain in DOMAINS:
        for day in DAYS:
            table = arrow_table(domain, generated(tenant, domain, day, rows))
            WRITERS[writer](tenant, domain, day, table)

    result, evaluations = _load(clickhouse, tenant)

    failures = [e for e in evaluations if not e.passed]
    assert result.success, [e.description for e in failures]
    assert failures == []
    assert len(evaluations) == 3 * len(DOMAINS) * len(DAYS)
    for domain in DOMAINS:
        for day in DAYS:
            expected = len(reference.events(tenant, domain, [day]))
            no_events = (writer, domain, day) == (EMPTY_DAY_WRITER, "transactions", DAYS[0])
            assert bool(expected) != no_events
            entry = log_row(clickhouse, tenant, domain, day)
            assert (entry["status"], entry["rows_loaded"]) == ("completed", expected), (domain, day)
            with clickhouse.session() as client:
                assert count_day(client, DOMAINS[domain], tenant, day) == expected
    if writer in NANOSECOND_WRITERS:
        last = scalar(
            clickhouse,
            "SELECT max(event_timestamp) FROM atlas.tbt_raw_events_casino FINAL "
            "WHERE organization_id = {o:String} AND event_date = {d:Date}",
            o=tenant.organization_id,
            d=DAYS[-1],
        )
        assert str(last).startswith("2026-09-07 23:59:59.999999")
    _assert_gold_matches(clickhouse, tenant)


def _assert_gold_matches(clickhouse, tenant: Tenant) -> None:
    with clickhouse.session() as client:
        ensure_schema(client)
        for day in DAYS:
            for table in GOLD_TABLES.values():
                replay_day(client, table, tenant, day, LOOKBACK)
    assert_gold_to_the_cent(clickhouse, tenant, DAYS, LOOKBACK)


_ids = iter(range(1, 10_000))
