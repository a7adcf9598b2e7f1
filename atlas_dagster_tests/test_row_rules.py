"""Every row of every file meets the export contract, checked inside ClickHouse during the INSERT.

Each case breaks one rule in one row far past any sample, in a file written without Parquet
statistics (so that the footer checks cannot see it): the day must be logged failed with a
message naming the day, the file and the column, keep no row, and a re-run of the fixed export
must give exactly its rows. Real chDB, and the real S3 server for the S3 path.
"""

from __future__ import annotations

import datetime as dt
import io
import random
import secrets
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from atlas_dagster.cli.demo_data import GENERATORS, arrow_table
from atlas_dagster.domains import DOMAINS
from atlas_dagster.exports import layout
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import Tenant
from atlas_dagster.validation.rows import RowContractError
from atlas_dagster_tests.conftest import log_row, scalar
from testkit.load_support import load_day
from testkit.s3_server import S3Server, s3_server  # noqa: F401  (fixture)

DAY = dt.date(2026, 11, 5)
ROWS = 3200
CLEAN_ROWS = 1000  # the clean file's rows; the bad file holds the rest
BAD_ROW = 1100  # in the bad file: past the 1000 rows the pandera sample used to read
CLEAN_FILE, BAD_FILE = "part-0.parquet", "part-1.parquet"

Mutation = Callable[[pa.Table], pa.Table]


def _rows(tenant: Tenant, domain: str) -> list[dict]:
    generate, _ = GENERATORS[domain]
    rows = generate(random.Random(f"rules-{tenant.key}-{domain}"), tenant, DAY, ROWS)
    return rows[:ROWS]  # casino and sportsbook write more than one event per bet


def _set(table: pa.Table, column: str, value: object, type_: pa.DataType | None = None) -> pa.Table:
    """The table with `column` set to `value` at BAD_ROW (and cast to `type_` if given)."""
    index = table.schema.get_field_index(column)
    values = table.column(column).to_pylist()
    values[BAD_ROW] = value
    field_type = type_ or table.schema.field(column).type
    return table.set_column(index, pa.field(column, field_type), pa.array(values, field_type))


def _doubles(table: pa.Table, bad: float) -> pa.Table:
    """amount as double (the contract allows it), one row holding `bad`."""
    amounts = [float(v) for v in table.column("amount").to_pylist()]
    amounts[BAD_ROW] = bad
    index = table.schema.get_field_index("amount")
    return table.set_column(index, pa.field("amount", pa.float64()), pa.array(amounts))


def _other_day(table: pa.Table) -> pa.Table:
    stamp = dt.datetime.combine(DAY + dt.timedelta(days=1), dt.time(0, 0, 1), dt.UTC)
    return _set(table, "event_timestamp", stamp)


# (case, domain, mutation of the bad file, column named, rule named)
CASES: list[tuple[str, str, Mutation, str, str]] = [
    ("null amount", "casino", lambda t: _set(t, "amount", None), "amount", "is null"),
    ("null user_id", "casino", lambda t: _set(t, "user_id", None), "user_id", "is null"),
    ("null event_id", "user", lambda t: _set(t, "event_id", None), "event_id", "is null"),
    ("empty user_id", "user", lambda t: _set(t, "user_id", ""), "user_id", "is empty"),
    (
        "negative amount",
        "transactions",
        lambda t: _set(t, "amount", pa.scalar(-500, pa.decimal128(18, 4)).as_py()),
        "amount",
        "is negative",
    ),
    (
        "negative potential_payout",
        "sportsbook",
        lambda t: _set(t, "potential_payout", pa.scalar(-1, pa.decimal128(18, 4)).as_py()),
        "potential_payout",
        "is negative",
    ),
    ("NaN amount", "casino", lambda t: _doubles(t, float("nan")), "amount", "NaN or infinite"),
    ("inf amount", "casino", lambda t: _doubles(t, float("inf")), "amount", "NaN or infinite"),
    ("huge amount", "casino", lambda t: _doubles(t, 1e20), "amount", "does not fit Decimal"),
    (
        "foreign tenant",
        "casino",
        lambda t: _set(t, "organization_id", "someone-else"),
        "organization_id",
        "names another tenant",
    ),
    ("foreign brand", "casino", lambda t: _set(t, "brand_id", "b2"), "brand_id", "another tenant"),
    ("wrong day", "casino", _other_day, "event_timestamp", "outside the partition's UTC day"),
    (
        "bad event_type",
        "casino",
        lambda t: _set(t, "event_type", "jackpot"),
        "event_type",
        "not an event type",
    ),
]


def _write(tenant: Tenant, domain: str, rows: list[dict], mutate: Mutation | None) -> Path:
    """Two files without statistics, small row groups (many blocks); the second one bad."""
    folder = Path(layout.day_folder(tenant, domain, DAY)[len("file://") :])
    folder.mkdir(parents=True, exist_ok=True)
    table = arrow_table(domain, rows)
    clean, bad = table.slice(0, CLEAN_ROWS), table.slice(CLEAN_ROWS)
    if mutate is not None:
        bad = mutate(bad)
        clean = clean.cast(bad.schema)
    options = {"write_statistics": False, "row_group_size": 500}
    pq.write_table(clean, folder / CLEAN_FILE, **options)
    pq.write_table(bad, folder / BAD_FILE, **options)
    return folder


def _raw_rows(clickhouse: ClickHouseResource, tenant: Tenant, domain: str) -> int:
    return int(
        scalar(
            clickhouse,
            f"SELECT count() FROM atlas.tbt_raw_events_{domain} WHERE organization_id = "
            "{o:String} AND brand_id = {b:String}",
            o=tenant.organization_id,
            b=tenant.brand_id,
        )
    )


def _assert_names_day_file_column(message: str, column: str, rule: str) -> None:
    assert str(DAY) in message
    assert f"{BAD_FILE}: column {column} {rule}" in message or (
        BAD_FILE in message and f"column {column}" in message and rule in message
    ), message
    assert f"{CLEAN_FILE}: column" not in message, message
    assert f"first at row {BAD_ROW} " in message, message


@pytest.mark.parametrize(
    ("domain", "mutate", "column", "rule"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_broken_row_fails_the_day_naming_day_file_and_column(
    clickhouse, make_tenant, domain: str, mutate: Mutation, column: str, rule: str
) -> None:
    tenant = make_tenant((domain,))
    rows = _rows(tenant, domain)
    _write(tenant, domain, rows, mutate)

    with pytest.raises(RowContractError) as raised:
        load_day(clickhouse, tenant, DOMAINS[domain], DAY, "run-bad")
    _assert_names_day_file_column(str(raised.value), column, rule)
    entry = log_row(clickhouse, tenant, domain, DAY)
    assert entry["status"] == "failed" and entry["rows_loaded"] == 0
    _assert_names_day_file_column(entry["error_message"], column, rule)
    assert _raw_rows(clickhouse, tenant, domain) == 0

    # The export is fixed and re-delivered: the re-run gives exactly its rows.
    _write(tenant, domain, rows, None)
    loaded = load_day(clickhouse, tenant, DOMAINS[domain], DAY, "run-fixed")
    assert loaded.source_rows == loaded.rows_loaded == ROWS and loaded.attempt == 2
    assert log_row(clickhouse, tenant, domain, DAY)["status"] == "completed"
    assert _raw_rows(clickhouse, tenant, domain) == ROWS


def test_every_broken_rule_of_every_file_is_listed(clickhouse, make_tenant) -> None:
    """The diagnosis is not the first error only: each (file, column) broken is named."""
    tenant = make_tenant(("casino",))
    rows = _rows(tenant, "casino")

    def two_faults(table: pa.Table) -> pa.Table:
        table = _set(table, "user_id", None)
        index = table.schema.get_field_index("currency")
        values = table.column("currency").to_pylist()
        values[len(values) - 1] = None
        return table.set_column(index, "currency", pa.array(values, pa.string()))

    _write(tenant, "casino", rows, two_faults)
    with pytest.raises(RowContractError) as raised:
        load_day(clickhouse, tenant, DOMAINS["casino"], DAY, "r")
    message = str(raised.value)
    assert f"{BAD_FILE}: column user_id is null in 1 row(s), first at row {BAD_ROW}" in message
    assert (
        f"{BAD_FILE}: column currency is null in 1 row(s), first at row {ROWS - CLEAN_ROWS - 1}"
        in message
    )


# --------------------------------------------------------------------------- the S3 path

KEY_ENV = "ATLAS_TEST_ROWS_S3_ACCESS_KEY_ID"
SECRET_ENV = "ATLAS_TEST_ROWS_S3_SECRET_ACCESS_KEY"


def _upload(server: S3Server, tenant: Tenant, tables: dict[str, pa.Table]) -> None:
    client = server.client()
    bucket, prefix = layout.split_s3_uri(layout.day_folder(tenant, "casino", DAY))
    if not any(b["Name"] == bucket for b in client.list_buckets().get("Buckets", [])):
        client.create_bucket(Bucket=bucket)
    for name, table in tables.items():
        body = io.BytesIO()
        pq.write_table(table, body, write_statistics=False, row_group_size=500)
        client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=body.getvalue())


def test_s3_null_amount_past_the_sample_fails_naming_the_object(
    s3_server: S3Server,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEY_ENV, s3_server.access_key_id)
    monkeypatch.setenv(SECRET_ENV, s3_server.secret_access_key)
    clickhouse = ClickHouseResource(dsn=f"chdb://{tmp_path / 'clickhouse'}")
    bucket = f"atlas-rules-{secrets.token_hex(4)}"
    tenant = s3_server.tenant(
        "s3rules",
        f"s3://{bucket}/exports",
        (dt.date(2026, 11, 1), dt.date(2026, 11, 7)),
        KEY_ENV,
        SECRET_ENV,
    )
    rows = _rows(tenant, "casino")
    table = arrow_table("casino", rows)
    _upload(s3_server, tenant, {BAD_FILE: _set(table, "amount", None)})  # one file

    with pytest.raises(RowContractError) as raised:
        load_day(clickhouse, tenant, DOMAINS["casino"], DAY, "r1")
    message = str(raised.value)
    assert str(DAY) in message and "column amount is null" in message
    assert f"s3://{tenant.source[len('s3://') :].split('/')[0]}/" in message and BAD_FILE in message
    assert s3_server.secret_access_key not in message
    entry = log_row(clickhouse, tenant, "casino", DAY)
    assert entry["status"] == "failed" and "column amount is null" in entry["error_message"]
    assert _raw_rows(clickhouse, tenant, "casino") == 0

    _upload(s3_server, tenant, {BAD_FILE: table})
    assert load_day(clickhouse, tenant, DOMAINS["casino"], DAY, "r2").rows_loaded == ROWS
    assert _raw_rows(clickhouse, tenant, "casino") == ROWS
