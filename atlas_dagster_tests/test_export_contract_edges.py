"""Where the export contract is lenient now and where it still refuses: wide decimals, INT96
outside ClickHouse's range, padded and unpadded folders of one day, sidecars, days with no
events in complete and incomplete exports, and per-domain dates."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from atlas_dagster.cli.demo_data import GENERATORS, arrow_table
from atlas_dagster.domains import get_domain
from atlas_dagster.exports.layout import SUCCESS_MARKER, ExportError, ExportSource, tenant_root
from atlas_dagster.loading.day_load import count_day
from atlas_dagster.orchestration.backfill_plan import build_plan
from atlas_dagster.orchestration.raw_work import plan_works
from atlas_dagster.partitions import partition_key
from atlas_dagster.scope import OutsideDomainWindow, check_scope
from atlas_dagster.tenants import TenantConfigError, load_tenants
from atlas_dagster.validation.rows import RowContractError
from atlas_dagster_tests.conftest import log_row
from testkit.load_support import load_day

DAY = dt.date(2026, 9, 7)
CASINO = get_domain("casino")


def _rows(tenant, n: int = 30, day: dt.date = DAY) -> list[dict]:
    generate, _ = GENERATORS["casino"]
    return generate(random.Random(f"edges-{tenant.key}-{day}"), tenant, day, n)


def _folder(tenant, month: str, day: str, domain: str = "casino") -> Path:
    root = tenant_root(tenant, domain)[len("file://") :]
    folder = Path(root) / f"year=2026/month={month}/day={day}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _with_amounts(table: pa.Table, amounts: list[Decimal], to: pa.DataType) -> pa.Table:
    index = table.schema.get_field_index("amount")
    return table.set_column(index, pa.field("amount", to), pa.array(amounts, to))


def _count(clickhouse, tenant) -> int:
    with clickhouse.session() as client:
        return count_day(client, CASINO, tenant, DAY)


def test_a_decimal_wider_than_4_places_loads_when_its_further_digits_are_zero(
    clickhouse, make_tenant
) -> None:
    tenant = make_tenant(("casino",), DAY, DAY)
    rows = _rows(tenant)
    amounts = [Decimal(r["amount"]).quantize(Decimal("0.000000001")) for r in rows]
    table = _with_amounts(arrow_table("casino", rows), amounts, pa.decimal128(38, 9))
    pq.write_table(table, _folder(tenant, "09", "07") / "bq-000000000000.parquet")
    assert load_day(clickhouse, tenant, CASINO, DAY, "r").rows_loaded == len(rows)
    with clickhouse.session() as client:
        total = client.command(
            "SELECT sum(amount) FROM atlas.tbt_raw_events_casino FINAL "
            "WHERE organization_id = {o:String}",
            parameters={"o": tenant.organization_id},
        )
    assert Decimal(total) == sum(Decimal(r["amount"]) for r in rows)


@pytest.mark.parametrize(
    ("arrow_type", "bad", "broken"),
    [
        (pa.decimal128(38, 9), Decimal("1.123456789"), "has non-zero digits past the 4th decimal"),
        (pa.decimal128(38, 4), Decimal("123456789012345678.1234"), "does not fit Decimal(18, 4)"),
    ],
    ids=["scale-9", "precision-38"],
)
def test_a_decimal_value_decimal_18_4_cannot_hold_is_refused_by_row(
    clickhouse, make_tenant, arrow_type, bad, broken
) -> None:
    tenant = make_tenant(("casino",), DAY, DAY)
    rows = _rows(tenant)
    amounts = [Decimal(r["amount"]) for r in rows]
    amounts[7] = bad
    table = _with_amounts(arrow_table("casino", rows), amounts, arrow_type)
    pq.write_table(table, _folder(tenant, "09", "07") / "part-0.parquet")
    with pytest.raises(RowContractError) as refused:
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    message = str(refused.value)
    assert f"part-0.parquet: column amount {broken}" in message
    assert "first at row 7 (0-based)" in message
    assert log_row(clickhouse, tenant, "casino", DAY)["status"] == "failed"
    assert _count(clickhouse, tenant) == 0


def test_an_int96_clickhouse_cannot_read_names_the_file_and_column(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",), DAY, DAY)
    table = arrow_table("casino", _rows(tenant))
    stamps = table.column("event_timestamp").to_pylist()
    stamps[3] = dt.datetime(1500, 1, 1, tzinfo=dt.UTC)  # before 1677: no nanosecond INT64 holds it
    index = table.schema.get_field_index("event_timestamp")
    table = table.set_column(
        index, table.schema.field(index), pa.array(stamps, pa.timestamp("ms", tz="UTC"))
    )
    folder = _folder(tenant, "09", "07")
    int96 = {"use_deprecated_int96_timestamps": True, "coerce_timestamps": None}
    pq.write_table(table, folder / "part-0.parquet", **int96)
    with pytest.raises(RowContractError) as refused:
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    message = str(refused.value)
    assert len(message.splitlines()) == 1
    assert f"file://{folder}/part-0.parquet: column event_timestamp holds an INT96" in message
    assert "(1500-01-01)" in message
    entry = log_row(clickhouse, tenant, "casino", DAY)
    assert entry["status"] == "failed" and "column event_timestamp" in entry["error_message"]
    assert _count(clickhouse, tenant) == 0


def test_padded_and_unpadded_folders_of_a_day_are_its_union(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",), DAY, DAY)
    table = arrow_table("casino", _rows(tenant, 40))
    pq.write_table(table.slice(0, 25), _folder(tenant, "09", "07") / "a.parquet")
    pq.write_table(table.slice(25), _folder(tenant, "9", "7") / "b.parquet")
    (_folder(tenant, "9", "7") / ".b.parquet.crc").write_bytes(b"\x00")
    (_folder(tenant, "9", "7") / "_committed_123").write_text("{}")
    assert load_day(clickhouse, tenant, CASINO, DAY, "r").rows_loaded == len(table)
    # The same file in both forms is refused, naming both folders.
    pq.write_table(table.slice(25), _folder(tenant, "09", "07") / "b.parquet")
    with pytest.raises(ExportError, match=r"month=(9/day=7|09/day=07)/b.parquet: the same file"):
        ExportSource(tenant).list_day("casino", DAY)


def test_the_window_listing_finds_unpadded_days(make_tenant) -> None:
    tenant = make_tenant(("casino",), DAY - dt.timedelta(days=2), DAY)
    for offset in range(3):
        day = DAY - dt.timedelta(days=offset)
        table = arrow_table("casino", _rows(tenant, 5, day))
        pq.write_table(table, _folder(tenant, str(day.month), str(day.day)) / "p.parquet")
    days = [DAY - dt.timedelta(days=i) for i in range(3)]
    listed = ExportSource(tenant).list_window("casino", days)
    assert {day: export.num_rows for day, export in listed.items()} == dict.fromkeys(days, 10)


def test_a_file_that_is_not_parquet_is_refused_by_name(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",), DAY, DAY)
    folder = _folder(tenant, "09", "07")
    pq.write_table(arrow_table("casino", _rows(tenant)), folder / "part-0.parquet")
    (folder / "manifest.json").write_text("{}")
    with pytest.raises(ExportError, match="manifest.json: corrupt or unreadable Parquet"):
        load_day(clickhouse, tenant, CASINO, DAY, "r")


def test_a_missing_day_is_empty_only_in_a_complete_export(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",), DAY, DAY)
    with pytest.raises(ExportError, match="not exported yet"):
        load_day(clickhouse, tenant, CASINO, DAY, "r1")
    assert log_row(clickhouse, tenant, "casino", DAY)["status"] == "failed"
    marker = Path(tenant.source[len("file://") :]) / "casino" / SUCCESS_MARKER
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_bytes(b"")
    loaded = load_day(clickhouse, tenant, CASINO, DAY, "r2")
    assert (loaded.rows_loaded, loaded.files, loaded.attempt) == (0, 0, 2)
    entry = log_row(clickhouse, tenant, "casino", DAY)
    assert (entry["status"], entry["rows_loaded"]) == ("completed", 0)


def test_a_complete_export_clears_a_day_that_no_longer_has_events(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",), DAY, DAY)
    folder = _folder(tenant, "09", "07")
    rows = _rows(tenant)
    pq.write_table(arrow_table("casino", rows), folder / "part-0.parquet")
    assert load_day(clickhouse, tenant, CASINO, DAY, "r1").rows_loaded == len(rows)
    (folder / "part-0.parquet").unlink()
    (folder.parents[4] / SUCCESS_MARKER).write_bytes(b"")  # {source}/casino/_SUCCESS
    assert load_day(clickhouse, tenant, CASINO, DAY, "r2").rows_loaded == 0
    assert _count(clickhouse, tenant) == 0


TENANTS_YAML = """
tenants:
  - organization_id: late
    brand_id: main
    source: exports
    start_date: 2026-09-01
    end_date: 2026-09-10
    export_complete: false
    domains:
      - user
      - name: sportsbook
        start_date: 2026-09-08
        export_complete: true
"""


def test_per_domain_dates_and_completeness(tmp_path: Path, clickhouse) -> None:
    path = tmp_path / "tenants.yaml"
    path.write_text(TENANTS_YAML)
    [tenant] = load_tenants(path)
    assert tenant.window("sportsbook") == (dt.date(2026, 9, 8), dt.date(2026, 9, 10))
    assert tenant.window("user") == (dt.date(2026, 9, 1), dt.date(2026, 9, 10))
    assert tenant.declares_complete("sportsbook") and not tenant.declares_complete("user")
    with pytest.raises(OutsideDomainWindow):
        check_scope(tenant, get_domain("sportsbook"), dt.date(2026, 9, 7))
    plan = build_plan(clickhouse, tenant, None, None, None)
    assert len(plan.partition_keys(get_domain("sportsbook"))) == 3
    assert len(plan.partition_keys(get_domain("user"))) == 10
    # A range over every raw asset skips the sportsbook days before its start, failing none.
    keys = [partition_key(dt.date(2026, 9, d), tenant.key) for d in (6, 7, 8)]
    works, refused, skipped = plan_works([tenant], [get_domain("sportsbook")], keys)
    assert [w.tenant_day.partition_date.day for w in works] == [8]
    assert (refused, skipped) == ([], 2)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("{name: sportsbook, start_date: 2026-08-01}", "is before the tenant's 2026-09-01"),
        ("{name: sportsbook, end_date: 2026-09-11}", "is after the tenant's 2026-09-10"),
        ("{name: sportsbook, export_complete: 'yes'}", "export_complete must be true or false"),
        ("{name: sportsbook, launch: 2026-09-02}", "unknown settings ['launch']"),
    ],
)
def test_per_domain_settings_are_validated(tmp_path: Path, entry: str, problem: str) -> None:
    path = tmp_path / "tenants.yaml"
    path.write_text(TENANTS_YAML.replace("- name: sportsbook", f"- {entry}\n      - name: casino"))
    with pytest.raises(TenantConfigError, match=problem.replace("[", r"\[").replace("(", r"\(")):
        load_tenants(path)
