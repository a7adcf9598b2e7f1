"""One tenant-day through validation, the inbound Null table and the bridge MV, on real chDB."""

import datetime as dt
import random
import threading
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from atlas_dagster.cli.demo_data import GENERATORS, arrow_table, write_day
from atlas_dagster.domains import DOMAINS
from atlas_dagster.exports.layout import ExportError, day_folder
from atlas_dagster.loading.day_load import insert_day, prepare_day
from atlas_dagster.loading.errors import LoadCanceled
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.scope import PartitionOutOfScope
from atlas_dagster.validation.schema import ValidationError
from atlas_dagster_tests.conftest import log_row, scalar
from testkit.load_support import load_day

pytestmark = pytest.mark.slow  # seconds per test: real loads and runs

DAY = dt.date(2026, 11, 5)
CASINO = DOMAINS["casino"]


def _rows(tenant, domain: str = "casino", day: dt.date = DAY, n: int = 200) -> list[dict]:
    generate, _ = GENERATORS[domain]
    return generate(random.Random(f"{tenant.key}-{domain}-{day}"), tenant, day, n)


def _raw_count(clickhouse, tenant, domain: str = "casino", day: dt.date = DAY) -> int:
    return int(
        scalar(
            clickhouse,
            f"SELECT count() FROM atlas.tbt_raw_events_{domain} FINAL WHERE organization_id = "
            "{o:String} AND brand_id = {b:String} AND event_date = {d:Date}",
            o=tenant.organization_id,
            b=tenant.brand_id,
            d=day,
        )
    )


def test_loads_every_domain_exactly(clickhouse, make_tenant) -> None:
    tenant = make_tenant()
    for name, domain in DOMAINS.items():
        rows = _rows(tenant, name)
        write_day(tenant, name, DAY, rows, files=3)
        loaded = load_day(clickhouse, tenant, domain, DAY, "run-1")
        assert loaded.rows_loaded == len(rows) == loaded.source_rows
        assert loaded.files == 3 and loaded.bytes > 0
        assert _raw_count(clickhouse, tenant, name) == len(rows)
        entry = log_row(clickhouse, tenant, name, DAY)
        assert entry["status"] == "completed" and entry["rows_loaded"] == len(rows)
        assert entry["run_id"] == "run-1" and entry["attempt"] == 1
        assert entry["s3_path"] == day_folder(tenant, name, DAY)


def test_money_and_normalisation_are_exact(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",))
    rows = _rows(tenant, n=50)
    rows[0] |= {"event_type": " OPEN ", "currency": "brl", "amount": Decimal("12.3456")}
    write_day(tenant, "casino", DAY, rows, files=1)
    load_day(clickhouse, tenant, CASINO, DAY, "r")
    total = scalar(
        clickhouse,
        "SELECT toString(sum(amount)) FROM atlas.tbt_raw_events_casino "
        "FINAL WHERE organization_id = {o:String}",
        o=tenant.organization_id,
    )
    assert Decimal(total) == sum(r["amount"] for r in rows)
    first = scalar(
        clickhouse,
        "SELECT concat(event_type, '/', currency) FROM "
        "atlas.tbt_raw_events_casino FINAL WHERE event_id = {e:String} AND "
        "organization_id = {o:String}",
        e=rows[0]["event_id"],
        o=tenant.organization_id,
    )
    assert first == "open/BRL"


def test_double_amounts_become_decimal_without_drift(clickhouse, make_tenant, tmp_path) -> None:
    tenant = make_tenant(("casino",))
    rows = _rows(tenant, n=20)
    table = arrow_table("casino", rows)
    doubles = [1.005, 0.1, 0.7, 123.4567] + [float(r["amount"]) for r in rows[4:]]
    table = table.set_column(
        table.schema.get_field_index("amount"), "amount", pa.array(doubles, pa.float64())
    )
    folder = Path(day_folder(tenant, "casino", DAY)[7:])
    folder.mkdir(parents=True)
    pq.write_table(table, folder / "part-0.parquet")
    load_day(clickhouse, tenant, CASINO, DAY, "r")
    with clickhouse.session() as client:
        got = client.query(
            "SELECT event_id, amount FROM atlas.tbt_raw_events_casino FINAL WHERE organization_id"
            " = {o:String} AND event_id IN {ids:Array(String)} ORDER BY event_id",
            parameters={"o": tenant.organization_id, "ids": [r["event_id"] for r in rows[:4]]},
        ).result_rows
    expected = sorted(
        zip([r["event_id"] for r in rows[:4]], ["1.005", "0.1", "0.7", "123.4567"], strict=True)
    )
    assert [(e, a) for e, a in got] == [(e, Decimal(v)) for e, v in expected]


def test_duplicate_event_ids_count_once_and_rerun_is_idempotent(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",))
    rows = _rows(tenant)
    write_day(tenant, "casino", DAY, rows + rows[:10], files=2)
    older = _rows(tenant, day=DAY - dt.timedelta(days=1))
    write_day(tenant, "casino", DAY - dt.timedelta(days=1), older)
    load_day(clickhouse, tenant, CASINO, DAY - dt.timedelta(days=1), "r0")
    first = load_day(clickhouse, tenant, CASINO, DAY, "r1")
    second = load_day(clickhouse, tenant, CASINO, DAY, "r2")
    assert first.rows_loaded == second.rows_loaded == len(rows)
    assert second.source_rows == len(rows) + 10
    assert second.attempt == 2
    # The export is re-delivered smaller: the re-run leaves exactly its rows.
    write_day(tenant, "casino", DAY, rows[:50], files=1)
    assert load_day(clickhouse, tenant, CASINO, DAY, "r3").rows_loaded == 50
    assert _raw_count(clickhouse, tenant) == 50
    assert _raw_count(clickhouse, tenant, day=DAY - dt.timedelta(days=1)) == len(older)


def test_duplicates_within_one_file_count_once(clickhouse, make_tenant) -> None:
    """The INSERT no longer merges a block on its key (optimize_on_insert = 0): duplicates of
    one file reach the raw table's part, and only the readers' FINAL makes them one event."""
    tenant = make_tenant(("casino",))
    rows = _rows(tenant)
    write_day(tenant, "casino", DAY, rows + rows[:10], files=1)
    loaded = load_day(clickhouse, tenant, CASINO, DAY, "r1")
    assert (loaded.rows_loaded, loaded.duplicate_rows, loaded.source_rows) == (
        len(rows),
        10,
        len(rows) + 10,
    )
    assert _raw_count(clickhouse, tenant) == len(rows)
    entry = log_row(clickhouse, tenant, "casino", DAY)
    assert (entry["status"], entry["rows_loaded"]) == ("completed", len(rows))


def test_no_files_fails_naming_the_path(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",))
    with pytest.raises(ExportError, match="no Parquet files.*day=05"):
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    entry = log_row(clickhouse, tenant, "casino", DAY)
    assert entry["status"] == "failed" and "day=05" in entry["error_message"]


def test_wrong_type_fails_before_insert_naming_file_column_types(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",))
    table = arrow_table("casino", _rows(tenant, n=20))
    index = table.schema.get_field_index("amount")
    table = table.set_column(index, "amount", table.column(index).cast(pa.string()))
    folder = Path(day_folder(tenant, "casino", DAY)[7:])
    folder.mkdir(parents=True)
    pq.write_table(table, folder / "part-0.parquet")
    with pytest.raises(ValidationError) as raised:
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    message = str(raised.value)
    assert "part-0.parquet" in message and "column amount" in message
    assert "type string" in message and "decimal" in message
    assert _raw_count(clickhouse, tenant) == 0
    assert log_row(clickhouse, tenant, "casino", DAY)["status"] == "failed"


def test_missing_column_is_named(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",))
    table = arrow_table("casino", _rows(tenant, n=20)).drop_columns(["game_id"])
    folder = Path(day_folder(tenant, "casino", DAY)[7:])
    folder.mkdir(parents=True)
    pq.write_table(table, folder / "part-0.parquet")
    with pytest.raises(ValidationError, match="part-0.parquet: missing column game_id"):
        load_day(clickhouse, tenant, CASINO, DAY, "r")


@pytest.mark.parametrize("statistics", [True, False])
def test_rows_of_another_tenant_refuse_the_whole_day(clickhouse, make_tenant, statistics) -> None:
    tenant, other = make_tenant(("casino",)), make_tenant(("casino",))
    rows = _rows(tenant, n=3000)
    rows[2500]["organization_id"] = other.organization_id  # far beyond the sample
    folder = Path(day_folder(tenant, "casino", DAY)[7:])
    folder.mkdir(parents=True)
    pq.write_table(
        arrow_table("casino", rows),
        folder / "part-0.parquet",
        write_statistics=statistics,
        row_group_size=500,
    )
    with pytest.raises(Exception, match="another tenant|partition's tenant"):
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    assert _raw_count(clickhouse, tenant) == 0
    assert (
        int(
            scalar(
                clickhouse,
                "SELECT count() FROM atlas.tbt_raw_events_casino WHERE "
                "organization_id = {o:String}",
                o=other.organization_id,
            )
        )
        == 0
    )
    assert log_row(clickhouse, tenant, "casino", DAY)["status"] == "failed"


def test_rows_of_another_day_are_refused(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",))
    rows = _rows(tenant, n=100)
    rows[-1]["event_timestamp"] = dt.datetime.combine(DAY + dt.timedelta(days=1), dt.time(), dt.UTC)
    write_day(tenant, "casino", DAY, rows, files=1)
    with pytest.raises(ValidationError, match="outside the partition's UTC day"):
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    assert _raw_count(clickhouse, tenant) == 0


def test_corrupt_parquet_fails_with_cause(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",))
    folder = Path(day_folder(tenant, "casino", DAY)[7:])
    folder.mkdir(parents=True)
    (folder / "part-0.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(ExportError, match="corrupt or unreadable Parquet"):
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    assert "corrupt" in log_row(clickhouse, tenant, "casino", DAY)["error_message"]


def test_out_of_scope_partitions_fail_at_once_without_log_row(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",))
    with pytest.raises(PartitionOutOfScope, match="outside tenant .* window"):
        load_day(clickhouse, tenant, CASINO, dt.date(2026, 10, 31), "r")
    with pytest.raises(PartitionOutOfScope, match="does not list domain 'user'"):
        load_day(clickhouse, tenant, DOMAINS["user"], DAY, "r")
    assert log_row(clickhouse, tenant, "casino", dt.date(2026, 10, 31)) == {}
    assert log_row(clickhouse, tenant, "user", DAY) == {}


def test_reload_clears_backfilled_rows_only(clickhouse, make_tenant) -> None:
    """Rows of another ingestion path (ClickPipes) survive the clear that precedes a re-load.

    The real-time row is one of the export's events, the newer version of it: the table merges
    an event's rows into its newest (ReplacingMergeTree(ingested_at)) whenever it likes, so only
    a real-time row that any merge keeps can show, merged or not, that the clear left it alone.
    (An event of its own would make the day hold more than the export, which a load refuses.)"""
    tenant = make_tenant(("casino",))
    rows = _rows(tenant, n=40)
    write_day(tenant, "casino", DAY, rows, files=1)
    with clickhouse.session() as client:
        ensure_schema(client)  # the realtime row comes first, whatever ran before this test
    scalar(
        clickhouse,
        "INSERT INTO atlas.tbt_raw_events_casino (organization_id, brand_id, event_date, "
        "event_id, event_type, event_timestamp, user_id, bet_id, game_id, amount, currency, "
        "source_file, ingestion_path, ingested_at) VALUES ({o:String}, {b:String}, {d:Date}, "
        "{e:String}, 'open', now64(6), 'u1', 'b1', 'slot-1', 1, 'BRL', '', 'realtime', "
        "now64(6) + INTERVAL 1 DAY)",
        o=tenant.organization_id,
        b=tenant.brand_id,
        d=DAY,
        e=rows[0]["event_id"],
    )
    for run in ("r1", "r2"):
        assert load_day(clickhouse, tenant, CASINO, DAY, run).rows_loaded == len(rows)
    found = scalar(
        clickhouse,
        "SELECT toString(countIf(ingestion_path = 'realtime')) || ' ' || toString(count()) "
        "FROM atlas.tbt_raw_events_casino FINAL WHERE organization_id = {o:String}",
        o=tenant.organization_id,
    )
    # The real-time row kept through two clears, and the day exactly the export's events.
    assert found == f"1 {len(rows)}"


def test_footer_statistics_refuse_nulls_and_foreign_ids_before_any_insert(
    clickhouse, make_tenant
) -> None:
    """The pandera footer rules name the file, the column and what the footer holds."""
    tenant, other = make_tenant(("casino",)), make_tenant(("casino",))
    rows = _rows(tenant, n=300)
    rows[10]["organization_id"] = other.organization_id
    table = arrow_table("casino", rows)
    index = table.schema.get_field_index("user_id")
    users = table.column(index).to_pylist()
    users[250] = None
    table = table.set_column(index, table.schema.field(index), pa.array(users, pa.string()))
    folder = Path(day_folder(tenant, "casino", DAY)[7:])
    folder.mkdir(parents=True)
    pq.write_table(table, folder / "part-7.parquet", row_group_size=100)
    with pytest.raises(ValidationError) as raised:
        load_day(clickhouse, tenant, CASINO, DAY, "r")
    message = str(raised.value)
    assert "part-7.parquet" in message
    assert "column user_id (1 null values) holds null values" in message
    assert "column organization_id" in message and "another tenant's ids" in message
    assert repr(tenant.organization_id) in message
    entry = log_row(clickhouse, tenant, "casino", DAY)
    assert entry["status"] == "failed" and "part-7.parquet" in entry["error_message"]
    assert _raw_count(clickhouse, tenant) == 0


def test_log_rows_keep_every_character_and_microsecond(clickhouse) -> None:
    """backfill_log rows are written as escaped literals: any text (quotes, backslashes, control
    characters, SQL, placeholders) comes back as written, and a version one microsecond later
    wins FINAL."""
    from atlas_dagster.checks.export_window import ExportState
    from atlas_dagster.checks.raw import CheckedDay, read_log_rows
    from atlas_dagster.loading import backfill_log
    from atlas_dagster.resources.schema import ensure_schema
    from atlas_dagster.tenants import Tenant

    nasty = "".join(map(chr, range(256))) + "é€😀 {x:String} %(y)s $rows ?'); DROP TABLE t; --\\"
    tenant = Tenant("org-lit'\\", "main\n", "file:///nowhere", DAY, DAY, ("casino",))
    entry = backfill_log.LogEntry(tenant.organization_id, tenant.brand_id, "casino", DAY, nasty)
    entry.s3_path, entry.error_message, entry.worker = nasty[::-1], nasty, nasty[:40]
    with clickhouse.session() as client:
        ensure_schema(client)
        backfill_log.write(client, entry, "running")
        # A version ahead of the clock, so that the next one is exactly 1 µs later.
        entry.updated_at = (entry.updated_at + dt.timedelta(days=1)).replace(microsecond=0)
        backfill_log.write(client, entry, "failed")
        checked = CheckedDay(tenant, CASINO, DAY, ExportState(0, None, None))
        row = read_log_rows(client, [checked])[checked.key]
    assert row["status"] == "failed"
    assert (row["error_message"], row["run_id"]) == (nasty, nasty)
    assert row["s3_path"] == nasty[::-1]
    assert row["updated_at"].replace(tzinfo=None) == entry.updated_at
    assert entry.updated_at.microsecond == 1


def test_a_cancel_seen_after_the_insert_fails_the_day_and_clears_its_rows(
    clickhouse, make_tenant
) -> None:
    """The embedded engine cannot stop its INSERT: a cancel set meanwhile still fails the day as
    canceled once the INSERT returns, with its rows cleared and no after-load hook run."""
    tenant = make_tenant(("casino",))
    write_day(tenant, "casino", DAY, _rows(tenant, n=40), files=2)
    prepared = prepare_day(clickhouse, tenant, CASINO, DAY, "run-canceled")
    canceled = threading.Event()
    canceled.set()
    hooked: list[object] = []
    with pytest.raises(LoadCanceled, match="the Dagster run was canceled during the INSERT"):
        insert_day(
            clickhouse,
            prepared,
            "run-canceled",
            canceled=canceled,
            after_load=lambda client, entry: hooked.append(entry),
        )
    assert hooked == []
    assert _raw_count(clickhouse, tenant) == 0
    entry = log_row(clickhouse, tenant, "casino", DAY)
    assert entry["status"] == "failed" and entry["attempt"] == 1
    assert entry["error_message"] == (
        "LoadCanceled: the Dagster run was canceled during the INSERT"
    )
