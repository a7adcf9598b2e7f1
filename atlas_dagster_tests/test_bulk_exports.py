"""Bulk export days: the contract's schema, exact loads on chDB, and determinism."""

import datetime as dt
from decimal import Decimal

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from atlas_dagster.cli.demo_data import arrow_table
from atlas_dagster.domains import DOMAINS
from atlas_dagster.exports.layout import ExportSource
from atlas_dagster.loading.day_load import PreparedDay, diagnose_rows
from atlas_dagster.validation.schema import check_schema
from atlas_dagster_tests.conftest import log_row, scalar
from testkit.bulk_exports import bulk_table, ensure_bulk_day, write_bulk_day
from testkit.load_support import load_day

pytestmark = pytest.mark.slow  # seconds per test: real loads and runs

DAY = dt.date(2026, 11, 5)
ROWS, ROWS_PER_FILE = 20_001, 7_000  # odd: the last casino bet has no settlement


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_bulk_day_validates_and_loads_exactly(clickhouse, make_tenant, domain: str) -> None:
    tenant = make_tenant()
    folder = write_bulk_day(tenant, domain, DAY, ROWS, rows_per_file=ROWS_PER_FILE)
    assert len(list(folder.glob("*.parquet"))) == 3

    source = ExportSource(tenant)
    day_export = source.list_day(domain, DAY)
    day_schema = check_schema(day_export, DOMAINS[domain], tenant, DAY)
    prepared = PreparedDay(tenant, DOMAINS[domain], DAY, day_export, day_schema, ())
    with clickhouse.session() as client:
        assert diagnose_rows(client, prepared, None) == []  # every row meets the contract

    loaded = load_day(clickhouse, tenant, DOMAINS[domain], DAY, "bulk")
    assert loaded.rows_loaded == loaded.source_rows == ROWS
    assert loaded.duplicate_rows == 0
    entry = log_row(clickhouse, tenant, domain, DAY)
    assert entry["status"] == "completed" and entry["rows_loaded"] == ROWS
    types = scalar(
        clickhouse,
        f"SELECT arrayStringConcat(arraySort(groupUniqArray(event_type)), ',') FROM "
        f"atlas.tbt_raw_events_{domain} FINAL WHERE organization_id = {{o:String}}",
        o=tenant.organization_id,
    )
    assert types.split(",") == sorted(DOMAINS[domain].event_types)


def test_same_rows_whatever_the_file_split(make_tenant) -> None:
    tenant = make_tenant()
    for domain in DOMAINS:
        whole = bulk_table(tenant, domain, DAY, 0, 5_000)
        assert whole.schema == arrow_table(domain, []).schema
        assert pc.count_distinct(whole["event_id"]).as_py() == whole.num_rows
        assert bulk_table(tenant, domain, DAY, 1_234, 3_000).equals(whole.slice(1_234, 1_766))
        assert not bulk_table(tenant, domain, DAY, 0, 100, seed=7).equals(whole.slice(0, 100))


def test_sportsbook_opens_carry_payout_and_odds_settlements_do_not(make_tenant) -> None:
    rows = bulk_table(make_tenant(), "sportsbook", DAY, 0, 4_000).to_pylist()
    opens = [r for r in rows if r["event_type"] == "open"]
    settled = [r for r in rows if r["event_type"] != "open"]
    assert opens and settled
    assert all(r["potential_payout"] is not None and r["odds"] is not None for r in opens)
    assert all(r["potential_payout"] is None and r["odds"] is None for r in settled)
    stake = {r["bet_id"]: r for r in opens}
    for row in settled:
        bet = stake[row["bet_id"]]
        assert row["event_timestamp"] >= bet["event_timestamp"]
        expected = {
            "win": bet["potential_payout"],
            "lose": Decimal(0),
            "cashout": bet["amount"] * Decimal("0.8"),
        }[row["event_type"]]
        assert row["amount"] == expected


def test_marker_reuses_an_identical_day_only(make_tenant) -> None:
    tenant = make_tenant()
    folder, reused = ensure_bulk_day(tenant, "casino", DAY, 1_000, rows_per_file=400)
    assert not reused and len(list(folder.glob("*.parquet"))) == 3
    assert ensure_bulk_day(tenant, "casino", DAY, 1_000, rows_per_file=400) == (folder, True)
    _, reused = ensure_bulk_day(tenant, "casino", DAY, 1_000, rows_per_file=1_000)
    assert not reused
    assert [pq.read_metadata(p).num_rows for p in folder.glob("*.parquet")] == [1_000]
