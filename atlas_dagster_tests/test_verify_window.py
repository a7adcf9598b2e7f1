"""verify's bulk re-read of a window of exports gives every day what reading it alone gives it.

The reference is the day-by-day path the checks used before (list_day, check_schema, the row
diagnosis of the day's files), composed here from the same public functions the loader runs. The
window mixes clean days with each kind of fault, across chunks and money types, on local files
and on a real S3 server (SeaweedFS), with a real embedded ClickHouse.
"""

from __future__ import annotations

import datetime as dt
import io
import random
import secrets
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from atlas_dagster.checks import export_window
from atlas_dagster.checks.export_window import ExportState, window_states
from atlas_dagster.checks.raw import window_outcomes
from atlas_dagster.cli.demo_data import GENERATORS, arrow_table
from atlas_dagster.domains import DOMAINS
from atlas_dagster.exports import layout
from atlas_dagster.exports.layout import DayExport, ExportError, ExportSource
from atlas_dagster.loading.day_load import PreparedDay, diagnose_rows
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import Tenant
from atlas_dagster.validation.rows import describe
from atlas_dagster.validation.schema import check_schema
from testkit.load_support import load_day
from testkit.s3_server import S3Server, s3_server  # noqa: F401  (fixture)

TRANSACTIONS = DOMAINS["transactions"]
FIRST = dt.date(2026, 10, 1)
ROWS = 40
BAD_ROW = 30


def _day(offset: int) -> dt.date:
    return FIRST + dt.timedelta(days=offset)


def _table(tenant: Tenant, day: dt.date) -> pa.Table:
    generate, _ = GENERATORS["transactions"]
    return arrow_table(
        "transactions", generate(random.Random(f"{tenant.key}{day}"), tenant, day, ROWS)
    )


def _set(table: pa.Table, column: str, value: object) -> pa.Table:
    index = table.schema.get_field_index(column)
    values = table.column(column).to_pylist()
    values[BAD_ROW] = value
    field = table.schema.field(column)
    return table.set_column(index, field, pa.array(values, field.type))


def _doubles(table: pa.Table, bad: float | None = None) -> pa.Table:
    """amount as double, as the contract allows; one row holding `bad` if given."""
    amounts = [float(v) for v in table.column("amount").to_pylist()]
    if bad is not None:
        amounts[BAD_ROW] = bad
    index = table.schema.get_field_index("amount")
    return table.set_column(index, pa.field("amount", pa.float64()), pa.array(amounts))


def _other_day(table: pa.Table, day: dt.date) -> pa.Table:
    stamp = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(0, 0, 1), dt.UTC)
    return _set(table, "event_timestamp", stamp)


def _parquet(table: pa.Table, statistics: bool = True) -> bytes:
    body = io.BytesIO()
    pq.write_table(table, body, write_statistics=statistics, row_group_size=16)
    return body.getvalue()


def _pages_corrupt(data: bytes) -> bytes:
    """The file with its data pages overwritten and its footer intact: the footer reads, the
    engine's read of the rows fails."""
    footer = int.from_bytes(data[-8:-4], "little") + 8
    return data[:4] + b"\xff" * (len(data) - 4 - footer) + data[-footer:]


def _window_files(tenant: Tenant) -> tuple[list[dt.date], dict[dt.date, dict[str, bytes]]]:
    """11 days: clean ones and one of each fault, by day offset."""
    tables = {offset: _table(tenant, _day(offset)) for offset in range(11)}
    files: dict[int, dict[str, bytes]] = {
        0: {"part-0.parquet": _parquet(tables[0]), "part-1.parquet": _parquet(tables[0][:5])},
        # a rule only the rows show (footers do not check signs)
        1: {
            "part-0.parquet": _parquet(
                _set(tables[1], "amount", pa.scalar(-5, pa.decimal128(18, 4)).as_py())
            )
        },
        # another day's row: the footers show it
        2: {"part-0.parquet": _parquet(_other_day(tables[2], _day(2)))},
        # another day's row, no statistics: only the rows show it (the folder's day per file)
        3: {"part-0.parquet": _parquet(_other_day(tables[3], _day(3)), statistics=False)},
        # 4: no export
        5: {"part-0.parquet": b"not parquet at all"},
        6: {"part-0.parquet": _parquet(_doubles(tables[6]))},
        7: {"part-0.parquet": _parquet(_doubles(tables[7], float("nan")), statistics=False)},
        8: {"part-0.parquet": _pages_corrupt(_parquet(tables[8]))},
        9: {"part-0.parquet": _parquet(tables[9].drop_columns(["currency"]))},
        10: {
            "part-0.parquet": _parquet(tables[10][:7]),
            "part-1.parquet": _parquet(tables[10][7:]),
        },
    }
    return [_day(offset) for offset in range(11)], {_day(o): f for o, f in files.items()}


def _day_by_day(clickhouse: ClickHouseResource, tenant: Tenant, day: dt.date) -> ExportState:
    """The reference: one day read alone, as the checks did before the bulk path."""
    hidden = tenant.s3.credentials() or ()
    try:
        export = ExportSource(tenant).list_day(TRANSACTIONS.name, day)
    except Exception as exc:
        return ExportState(0, None, clickhouse.redact(f"{type(exc).__name__}: {exc}", hidden))
    try:
        schema = check_schema(export, TRANSACTIONS, tenant, day)
        prepared = PreparedDay(tenant, TRANSACTIONS, day, export, schema, hidden)
        with clickhouse.session() as client:
            violations = diagnose_rows(client, prepared, clickhouse.resolved_cluster())
    except Exception as exc:
        return ExportState.of(export, clickhouse.redact(f"{type(exc).__name__}: {exc}", hidden))
    return ExportState.of(export, describe(day, TRANSACTIONS, violations) if violations else None)


def _bulk(
    clickhouse: ClickHouseResource,
    tenant: Tenant,
    days: list[dt.date],
    monkeypatch: pytest.MonkeyPatch,
) -> dict[dt.date, ExportState]:
    """window_states in chunks of 4 days; asserts that only the chunk holding the corrupt pages
    (day 8, with day 10: same money type) was read again day by day."""
    monkeypatch.setattr(export_window, "CHUNK_DAYS", 4)
    alone = []

    def diagnose_alone(client, prepared, cluster):
        alone.append(prepared.day)
        return diagnose_rows(client, prepared, cluster)

    monkeypatch.setattr(export_window, "diagnose_rows", diagnose_alone)
    with clickhouse.session() as client:
        states = window_states(client, clickhouse, tenant, TRANSACTIONS, days)
    # exports that reach the rows: days 0 1 3 6 | 7 8 10, by money type 0 1 3, 6 | 7, 8 10
    assert sorted(alone) == [days[8], days[10]]
    return states


def _assert_each_fault_named(states: dict[dt.date, ExportState], days: list[dt.date]) -> None:
    errors = {days.index(day): state.error for day, state in states.items()}
    assert sorted(o for o, e in errors.items() if e is None) == [0, 6, 10]
    assert (states[days[0]].files, states[days[0]].rows, states[days[0]].error) == (
        2,
        ROWS + 5,
        None,
    )
    assert (states[days[10]].files, states[days[10]].rows, states[days[10]].error) == (
        2,
        ROWS,
        None,
    )
    assert "part-0.parquet: column amount is negative in 1 row(s)" in errors[1]
    assert f"first at row {BAD_ROW} " in errors[1] and str(days[1]) in errors[1]
    assert "falls outside the partition's UTC day" in errors[2]
    assert "column event_timestamp is outside the partition's UTC day in 1 row(s)" in errors[3]
    assert "no Parquet files for the day" in errors[4] and states[days[4]].rows is None
    assert "corrupt or unreadable Parquet" in errors[5]
    assert "column amount is NaN or infinite" in errors[7]
    assert "missing column currency" in errors[9]


def _write_local(tenant: Tenant, files: dict[dt.date, dict[str, bytes]]) -> None:
    for day, named in files.items():
        folder = Path(layout.day_folder(tenant, "transactions", day)[len("file://") :])
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in named.items():
            (folder / name).write_bytes(data)


def test_bulk_states_equal_day_by_day(
    clickhouse, make_tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = make_tenant(("transactions",), FIRST, _day(20))
    days, files = _window_files(tenant)
    _write_local(tenant, files)
    states = _bulk(clickhouse, tenant, days, monkeypatch)

    assert states == {day: _day_by_day(clickhouse, tenant, day) for day in days}
    _assert_each_fault_named(states, days)
    # The corrupt pages fail their chunk's query; the chunk is read again day by day and only
    # their day fails.
    assert states[days[8]].error and "part-0.parquet" in states[days[8]].error


def test_a_changed_or_removed_export_is_caught_after_the_load(clickhouse, make_tenant) -> None:
    """The log and raw table say loaded; the export changes behind them: verify says so."""
    tenant = make_tenant(("transactions",), FIRST, _day(20))
    days = [_day(offset) for offset in range(4)]
    tables = {day: _table(tenant, day) for day in days}
    _write_local(tenant, {day: {"part-0.parquet": _parquet(t)} for day, t in tables.items()})
    for day in days:
        load_day(clickhouse, tenant, TRANSACTIONS, day, "run-load")
    outcomes = dict(window_outcomes(clickhouse, tenant, TRANSACTIONS, days))
    assert all(o.passed for day in days for o in outcomes[day])

    changed, removed, broken = days[1], days[2], days[3]
    _write_local(tenant, {changed: {"part-1.parquet": _parquet(tables[changed][:3])}})
    folder = Path(layout.day_folder(tenant, "transactions", removed)[len("file://") :])
    (folder / "part-0.parquet").unlink()
    bad = _set(tables[broken], "user_id", "")  # same size and rows: only the rows tell
    _write_local(tenant, {broken: {"part-0.parquet": _parquet(bad, statistics=False)}})

    outcomes = {
        day: {o.check_name: o for o in checks}
        for day, checks in window_outcomes(clickhouse, tenant, TRANSACTIONS, days)
    }
    assert all(o.passed for o in outcomes[days[0]].values())
    assert not outcomes[changed]["rows_reconcile"].passed
    assert f"the export has {ROWS + 3} rows" in outcomes[changed]["rows_reconcile"].description
    assert outcomes[changed]["schema_conformance"].passed
    assert not outcomes[removed]["rows_reconcile"].passed
    assert "no Parquet files" in outcomes[removed]["schema_conformance"].description
    # The counts still agree; the file is not the one loaded (a new mtime), which says enough.
    assert outcomes[broken]["rows_reconcile"].description.startswith(
        "the export changed since the day was loaded (part-0.parquet replaced)"
    )
    assert "column user_id is empty" in outcomes[broken]["schema_conformance"].description


# --------------------------------------------------------------------------- the S3 path


def _list_day(source: ExportSource, day: dt.date) -> DayExport | ExportError:
    try:
        return source.list_day("transactions", day)
    except ExportError as exc:
        return exc


def _listed(export: DayExport | ExportError) -> list[tuple[str, int, int]] | str:
    if isinstance(export, ExportError):
        return str(export)
    return [(f.uri, f.size, f.num_rows) for f in export.files]


KEY_ENV = "ATLAS_TEST_WINDOW_S3_ACCESS_KEY_ID"
SECRET_ENV = "ATLAS_TEST_WINDOW_S3_SECRET_ACCESS_KEY"


def test_s3_window_is_listed_in_one_pass_and_equals_day_by_day(
    s3_server: S3Server,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEY_ENV, s3_server.access_key_id)
    monkeypatch.setenv(SECRET_ENV, s3_server.secret_access_key)
    clickhouse = ClickHouseResource(dsn=f"chdb://{tmp_path / 'clickhouse'}")
    tenant = s3_server.tenant(
        "s3window",
        f"s3://atlas-window-{secrets.token_hex(4)}/exports",
        (FIRST, _day(20)),
        KEY_ENV,
        SECRET_ENV,
        ("transactions",),
    )
    days, files = _window_files(tenant)
    # Days around the window, and a nested folder inside it, that the window must not take.
    outside = {_day(-1): {"part-0.parquet": b"x"}, _day(12): {"part-0.parquet": b"x"}}
    client = s3_server.client()
    bucket, _ = layout.split_s3_uri(tenant.source)
    client.create_bucket(Bucket=bucket)
    for day, named in {**files, **outside}.items():
        _, prefix = layout.split_s3_uri(layout.day_folder(tenant, "transactions", day))
        for name, data in named.items():
            client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=data)
    _, prefix = layout.split_s3_uri(layout.day_folder(tenant, "transactions", days[0]))
    client.put_object(Bucket=bucket, Key=f"{prefix}/old/part-9.parquet", Body=b"x")

    source = ExportSource(tenant)
    listings = []
    source._client.meta.events.register(
        "before-call.s3.ListObjectsV2", lambda **kwargs: listings.append(kwargs)
    )
    listed = source.list_window("transactions", days)
    # One pass for 11 days (one page), after one delimited listing of each folder a job may
    # commit in ({source}/{domain}/ and the tenant's): _SUCCESS, _delta_log/, metadata/.
    assert len(listings) == 3
    assert [call["params"]["query_string"].get("delimiter") for call in listings] == [
        "/", "/", None,
    ]  # fmt: skip
    assert not isinstance(listed[days[0]], Exception), listed[days[0]]
    assert [f.name for f in listed[days[0]].files] == ["part-0.parquet", "part-1.parquet"]
    assert isinstance(listed[days[4]], ExportError)
    for start in (9, 10):  # windows from day=10 and day=11 (the walk's start key per digit)
        window = days[start:]
        assert {
            day: _listed(export)
            for day, export in source.list_window("transactions", window).items()
        } == {day: _listed(_list_day(source, day)) for day in window}

    states = _bulk(clickhouse, tenant, days, monkeypatch)
    assert states == {day: _day_by_day(clickhouse, tenant, day) for day in days}
    _assert_each_fault_named(states, days)
    assert all(s3_server.secret_access_key not in (s.error or "") for s in states.values())
