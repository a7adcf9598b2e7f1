"""Tenant columns only in the folder names (Hive layout), integer ids, where a job's _SUCCESS
sits, and table formats refused: each case written directly with pyarrow (or, for Delta Lake,
delta-rs), loaded one day at a time, with nothing of a refused day kept."""

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
from atlas_dagster.reporting.advice import diagnose
from atlas_dagster.validation.rows import RowContractError
from atlas_dagster.validation.schema import ValidationError, column_readings
from atlas_dagster_tests.conftest import log_row
from testkit.load_support import load_day

DAY = dt.date(2026, 9, 7)
CASINO = get_domain("casino")
TRANSACTIONS = get_domain("transactions")


def _table(tenant, domain: str = "casino", n: int = 30) -> pa.Table:
    generate, _ = GENERATORS[domain]
    rows = generate(random.Random(f"partitions-{tenant.key}-{domain}"), tenant, DAY, n)
    return arrow_table(domain, rows)


def _folder(tenant, domain: str = "casino") -> Path:
    root = tenant_root(tenant, domain)[len("file://") :]
    folder = Path(root) / f"year={DAY.year}/month={DAY.month}/day={DAY.day}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _without_tenant(table: pa.Table) -> pa.Table:
    return table.drop_columns(["organization_id", "brand_id"])


def _set(table: pa.Table, name: str, values: list, to: pa.DataType) -> pa.Table:
    index = table.schema.get_field_index(name)
    return table.set_column(index, pa.field(name, to), pa.array(values, to))


def _stored(clickhouse, tenant, column: str, domain=CASINO) -> list[tuple]:
    with clickhouse.session() as client:
        return client.query(
            f"SELECT organization_id, brand_id, {column} FROM atlas.{domain.raw_table} FINAL "
            "WHERE organization_id = {o:String} AND brand_id = {b:String} ORDER BY event_id",
            parameters={"o": tenant.organization_id, "b": tenant.brand_id},
        ).result_rows


def _refused_and_empty(clickhouse, tenant, domain=CASINO) -> str:
    """The day is logged failed, holds no row, and the client's report tells the client what to
    change in the export (not 'a problem on Atlas's side')."""
    entry = log_row(clickhouse, tenant, domain.name, DAY)
    assert entry["status"] == "failed"
    with clickhouse.session() as client:
        assert count_day(client, domain, tenant, DAY) == 0
    [advice] = diagnose(tenant, entry)
    assert not advice.ours, entry["error_message"]
    assert tenant.source not in f"{advice.file} {advice.problem} {advice.advice}"
    return entry["error_message"]


def test_tenant_columns_only_in_the_folder_names_are_read_from_the_path(
    clickhouse, make_tenant
) -> None:
    tenant = make_tenant(("casino",), DAY, DAY)
    table = _table(tenant)
    pq.write_table(_without_tenant(table), _folder(tenant) / "part-00000.c000.snappy.parquet")
    export = ExportSource(tenant).list_day("casino", DAY)
    assert column_readings(export.files[0], CASINO)[0] == (
        "organization_id, brand_id: not in the file, from its folders "
        "(organization_id=…/brand_id=…)"
    )

    assert load_day(clickhouse, tenant, CASINO, DAY, "r").rows_loaded == len(table)
    stored = _stored(clickhouse, tenant, "event_id")
    assert {(o, b) for o, b, _ in stored} == {(tenant.organization_id, tenant.brand_id)}
    assert len(stored) == len(table)


def test_a_file_holding_another_tenants_rows_is_refused_though_its_folder_is_ours(
    clickhouse, make_tenant
) -> None:
    """The file's own column is what the guard sees, never the folder's value: a row of another
    organization in our organization_id=…/ folder refuses the day (no statistics to find it
    first), naming the file."""
    tenant = make_tenant(("casino",), DAY, DAY)
    table = _table(tenant)
    orgs = [tenant.organization_id] * len(table)
    orgs[7] = "someone-else"
    table = _set(table, "organization_id", orgs, pa.string())
    pq.write_table(table, _folder(tenant) / "part-0.parquet", write_statistics=False)

    with pytest.raises(RowContractError) as refused:
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    assert "part-0.parquet: column organization_id names another tenant" in str(refused.value)
    assert "first at row 7 (0-based) with value 'someone-else'" in str(refused.value)
    _refused_and_empty(clickhouse, tenant)


def test_files_of_a_day_that_disagree_on_where_a_tenant_column_is_are_refused(
    clickhouse, make_tenant
) -> None:
    tenant = make_tenant(("casino",), DAY, DAY)
    table = _table(tenant)
    pq.write_table(table.slice(0, 10), _folder(tenant) / "part-0.parquet")
    pq.write_table(_without_tenant(table.slice(10)), _folder(tenant) / "part-1.parquet")

    with pytest.raises(ValidationError, match="part-0.parquet: holds column organization_id, "):
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    assert "part-1.parquet has only in its folder name" in _refused_and_empty(clickhouse, tenant)


@pytest.mark.parametrize(
    ("arrow_type", "value", "stored"),
    [
        (pa.int64(), 12_345_678_901_234, "12345678901234"),
        (pa.int64(), 9_007_199_254_740_993, "9007199254740993"),  # 2^53 + 1: no double holds it
        (pa.int32(), -42, "-42"),
        (pa.uint64(), 18_446_744_073_709_551_600, "18446744073709551600"),
        (pa.decimal128(38, 0), 123_456_789_012_345_678_901_234_567_890, None),
    ],
    ids=["int64", "int64-above-2^53", "int32", "uint64", "decimal-38-0"],
)
def test_integer_ids_are_stored_as_their_exact_decimal_text(
    clickhouse, make_tenant, arrow_type: pa.DataType, value, stored: str | None
) -> None:
    tenant = make_tenant(("casino",), DAY, DAY)
    table = _table(tenant, n=5)
    n = len(table)
    # Decimals from Python ints: Decimal arithmetic would round to 28 digits.
    as_arrow = Decimal if pa.types.is_decimal(arrow_type) else int
    for column in ("user_id", "bet_id", "game_id"):
        table = _set(table, column, [as_arrow(value)] * n, arrow_type)
    table = _set(table, "event_id", [as_arrow(value + i) for i in range(n)], arrow_type)
    pq.write_table(table, _folder(tenant) / "part-0.parquet")

    assert load_day(clickhouse, tenant, CASINO, DAY, "r").rows_loaded == n
    text = stored or str(value)
    assert {row[2:] for row in _stored(clickhouse, tenant, "user_id, bet_id, game_id")} == {
        (text, text, text)
    }
    event_ids = [row[2] for row in _stored(clickhouse, tenant, "event_id")]
    assert sorted(event_ids) == sorted(str(value + i) for i in range(n))


@pytest.mark.parametrize(
    ("arrow_type", "value"),
    [(pa.float64(), 12_345_678_901_234.0), (pa.decimal128(12, 2), Decimal("12.50"))],
    ids=["double", "decimal-with-scale"],
)
def test_an_id_that_cannot_be_exact_is_refused_naming_file_and_column(
    clickhouse, make_tenant, arrow_type: pa.DataType, value
) -> None:
    tenant = make_tenant(("transactions",), DAY, DAY)
    table = _table(tenant, "transactions", n=5)
    table = _set(table, "user_id", [value] * len(table), arrow_type)
    pq.write_table(table, _folder(tenant, "transactions") / "unload_0_0_0.parquet")

    with pytest.raises(ValidationError) as refused:
        load_day(clickhouse, tenant, TRANSACTIONS, DAY, "r")
    assert f"unload_0_0_0.parquet: column user_id has type {arrow_type}, expected string or " in (
        str(refused.value)
    )
    assert "cannot be stored exactly" in str(refused.value)
    _refused_and_empty(clickhouse, tenant, TRANSACTIONS)


def test_binary_tenant_columns_pass_their_footer_statistics(clickhouse, make_tenant) -> None:
    """BYTE_ARRAY without the UTF8 annotation (Impala, older Hive): pyarrow gives its statistics
    as bytes, compared with the partition's ids as text."""
    tenant = make_tenant(("casino",), DAY, DAY)
    table = _table(tenant)
    for column in ("organization_id", "brand_id"):
        values = [v.encode() for v in table.column(column).to_pylist()]
        table = _set(table, column, values, pa.binary())
    pq.write_table(table, _folder(tenant) / "000000_0")
    assert load_day(clickhouse, tenant, CASINO, DAY, "r").rows_loaded == len(table)


@pytest.mark.parametrize("level", ["domain", "tenant"])
def test_a_jobs_success_marker_declares_empty_days_where_spark_writes_it(
    clickhouse, make_tenant, level: str
) -> None:
    """partitionBy("organization_id", "brand_id", …) commits at {source}/{domain}/, a job per
    tenant at the tenant's own folder: either way a day without a folder has no events."""
    tenant = make_tenant(("casino",), DAY, DAY)
    root = Path(tenant_root(tenant, "casino")[len("file://") :])
    marker_folder = root.parent.parent if level == "domain" else root
    marker_folder.mkdir(parents=True, exist_ok=True)

    with pytest.raises(ExportError, match="not exported yet"):
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    (marker_folder / SUCCESS_MARKER).write_bytes(b"")
    assert load_day(clickhouse, tenant, CASINO, DAY, "r").rows_loaded == 0
    assert log_row(clickhouse, tenant, "casino", DAY)["status"] == "completed"


def test_a_delta_lake_table_is_refused_before_any_insert(clickhouse, make_tenant) -> None:
    """A real Delta table (delta-rs) at {source}/{domain}, partitioned as the layout is and
    then overwritten: its folders still hold the first version's files, which a file-drop read
    would load twice. The day is refused in one line, nothing is inserted."""
    from deltalake import write_deltalake

    tenant = make_tenant(("casino",), DAY, DAY)
    table = _table(tenant)
    partitioned = table.append_column("year", pa.array([DAY.year] * len(table), pa.int32()))
    partitioned = partitioned.append_column("month", pa.array([DAY.month] * len(table), pa.int32()))
    partitioned = partitioned.append_column("day", pa.array([DAY.day] * len(table), pa.int32()))
    domain_folder = Path(tenant.source[len("file://") :]) / "casino"
    by = ["organization_id", "brand_id", "year", "month", "day"]
    write_deltalake(str(domain_folder), partitioned, partition_by=by)
    write_deltalake(str(domain_folder), partitioned.slice(0, 10), partition_by=by, mode="overwrite")
    day_files = list(_folder(tenant).glob("*.parquet"))
    assert len(day_files) == 2  # the overwritten version's file is still in the day's folder

    with pytest.raises(ExportError) as refused:
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    message = str(refused.value)
    assert "\n" not in message
    assert f"{tenant.source}/casino/ is a Delta Lake table (_delta_log/ beside its data)" in message
    assert "Export the table's current version as plain Parquet" in message
    _refused_and_empty(clickhouse, tenant)
    listed = ExportSource(tenant).list_window("casino", [DAY])
    assert isinstance(listed[DAY], ExportError) and "Delta Lake" in str(listed[DAY])


def test_an_iceberg_metadata_folder_beside_the_tenant_folders_is_refused(
    clickhouse, make_tenant
) -> None:
    tenant = make_tenant(("casino",), DAY, DAY)
    pq.write_table(_table(tenant), _folder(tenant) / "00000-0-data.parquet")
    root = Path(tenant_root(tenant, "casino")[len("file://") :])
    (root / "metadata").mkdir()
    (root / "metadata" / "v1.metadata.json").write_text("{}")

    with pytest.raises(ExportError, match=r"brand_id=main/ is an Apache Iceberg table \(metadata/"):
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    _refused_and_empty(clickhouse, tenant)


def test_a_partition_folder_inside_a_day_folder_is_refused_not_skipped(
    clickhouse, make_tenant
) -> None:
    """partitionBy(…, "day", "event_type") puts the day's rows one folder deeper: read as the
    day's files they would be missed, so the day is refused naming the folder."""
    tenant = make_tenant(("casino",), DAY, DAY)
    table = _table(tenant)
    (_folder(tenant) / "event_type=open").mkdir()
    pq.write_table(table, _folder(tenant) / "event_type=open" / "part-0.parquet")
    (_folder(tenant) / "_temporary").mkdir()  # Spark's scratch folder: never data

    with pytest.raises(ExportError, match=r"day=7/event_type=open/: a partition folder inside"):
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    _refused_and_empty(clickhouse, tenant)
