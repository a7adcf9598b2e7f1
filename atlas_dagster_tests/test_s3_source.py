"""A tenant whose source is s3://bucket/prefix, loaded by chDB's s3() from a real SeaweedFS."""

from __future__ import annotations

import datetime as dt
import io
import random
import secrets
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from atlas_dagster.cli.demo_data import GENERATORS, arrow_table
from atlas_dagster.domains import DOMAINS
from atlas_dagster.exports import layout
from atlas_dagster.loading.faults import classify
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import Tenant
from atlas_dagster_tests.conftest import log_row, scalar
from testkit.load_support import load_day
from testkit.s3_server import S3Server, s3_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow  # seconds per test: real loads and runs

DAY = dt.date(2026, 11, 5)
CASINO = DOMAINS["casino"]
KEY_ENV = "ATLAS_TEST_S3_ACCESS_KEY_ID"
SECRET_ENV = "ATLAS_TEST_S3_SECRET_ACCESS_KEY"


@pytest.fixture
def fresh_clickhouse(tmp_path: Path) -> ClickHouseResource:
    return ClickHouseResource(dsn=f"chdb://{tmp_path / 'clickhouse'}")


def _upload_day(server: S3Server, tenant: Tenant, rows: list[dict], files: int = 2) -> None:
    client = server.client()
    bucket, prefix = layout.split_s3_uri(layout.day_folder(tenant, "casino", DAY))
    client.create_bucket(Bucket=bucket)
    table = arrow_table("casino", rows)
    chunk = -(-len(rows) // files)
    for index in range(files):
        body = io.BytesIO()
        pq.write_table(table.slice(index * chunk, chunk), body)
        client.put_object(
            Bucket=bucket, Key=f"{prefix}/part-{index:05d}.parquet", Body=body.getvalue()
        )


def _setup(server: S3Server, monkeypatch: pytest.MonkeyPatch, n: int = 300):
    bucket = f"atlas-test-{secrets.token_hex(4)}"
    tenant = server.tenant(
        "acme",
        f"s3://{bucket}/exports/v1",
        (dt.date(2026, 11, 1), dt.date(2026, 11, 7)),
        KEY_ENV,
        SECRET_ENV,
    )
    generate, _ = GENERATORS["casino"]
    rows = generate(random.Random(f"s3-{tenant.key}-{DAY}"), tenant, DAY, n)
    _upload_day(server, tenant, rows)
    monkeypatch.setenv(KEY_ENV, server.access_key_id)
    monkeypatch.setenv(SECRET_ENV, server.secret_access_key)
    return tenant, rows


def _loaded(clickhouse: ClickHouseResource, tenant: Tenant) -> tuple[int, Decimal]:
    parameters = {"o": tenant.organization_id, "b": tenant.brand_id, "d": DAY}
    where = "WHERE organization_id = {o:String} AND brand_id = {b:String} AND event_date = {d:Date}"
    count = scalar(
        clickhouse, f"SELECT count() FROM atlas.tbt_raw_events_casino FINAL {where}", **parameters
    )
    total = scalar(
        clickhouse,
        f"SELECT toString(sum(amount)) FROM atlas.tbt_raw_events_casino FINAL {where}",
        **parameters,
    )
    return int(count), Decimal(total)


def test_loads_a_day_from_s3(s3_server: S3Server, fresh_clickhouse, monkeypatch) -> None:  # noqa: F811
    tenant, rows = _setup(s3_server, monkeypatch)
    loaded = load_day(fresh_clickhouse, tenant, CASINO, DAY, "run-s3")
    assert loaded.rows_loaded == loaded.source_rows == len(rows)
    assert loaded.files == 2 and loaded.bytes > 0
    assert _loaded(fresh_clickhouse, tenant) == (len(rows), sum(r["amount"] for r in rows))
    entry = log_row(fresh_clickhouse, tenant, "casino", DAY)
    assert entry["status"] == "completed", entry
    assert entry["rows_loaded"] == len(rows) and entry["run_id"] == "run-s3"
    assert entry["s3_path"] == layout.day_folder(tenant, "casino", DAY)


def _assert_failed_without_secrets(clickhouse, tenant, wrong: str, right: str) -> str:
    entry = log_row(clickhouse, tenant, "casino", DAY)
    assert entry["status"] == "failed", entry
    message = entry["error_message"]
    assert message
    assert wrong not in message
    assert right not in message
    return message


def test_wrong_secret_fails_and_is_not_logged(
    s3_server: S3Server,  # noqa: F811
    fresh_clickhouse,
    monkeypatch,
) -> None:
    tenant, _ = _setup(s3_server, monkeypatch)
    wrong = "WRONG-" + secrets.token_urlsafe(24)
    monkeypatch.setenv(SECRET_ENV, wrong)
    with pytest.raises(layout.ExportError) as raised:
        load_day(fresh_clickhouse, tenant, CASINO, DAY, "run-bad")
    message = _assert_failed_without_secrets(
        fresh_clickhouse, tenant, wrong, s3_server.secret_access_key
    )
    assert wrong not in str(raised.value)
    assert "SignatureDoesNotMatch" in message or "403" in message or "Forbidden" in message


def test_wrong_secret_in_clickhouse_s3_fails_and_is_not_logged(
    s3_server: S3Server,  # noqa: F811
    fresh_clickhouse,
    monkeypatch,
) -> None:
    """Listing (boto3) succeeds with the right keys; ClickHouse's s3() gets the wrong secret."""
    tenant, _ = _setup(s3_server, monkeypatch)
    good = layout.s3_resource(tenant)
    monkeypatch.setattr(layout, "s3_resource", lambda _tenant: good)
    wrong = "WRONG-" + secrets.token_urlsafe(24)
    monkeypatch.setenv(SECRET_ENV, wrong)
    with pytest.raises(DatabaseError) as raised:
        load_day(fresh_clickhouse, tenant, CASINO, DAY, "run-bad-ch")
    message = _assert_failed_without_secrets(
        fresh_clickhouse, tenant, wrong, s3_server.secret_access_key
    )
    assert "403" in message and "S3_ERROR" in message
    assert wrong not in str(raised.value)
    fault = classify(raised.value)  # a wrong secret is never retried (loading/faults.py)
    assert not fault.transient and "S3_ERROR" in fault.cause, fault
    assert _loaded(fresh_clickhouse, tenant)[0] == 0


def test_a_partitioned_layout_on_s3_lists_in_one_walk_and_loads(
    s3_server: S3Server,  # noqa: F811
    fresh_clickhouse,
    monkeypatch,
) -> None:
    """partitionBy's unpadded folders (day=2), a day in both forms (their union), hidden
    sidecars, and a `_SUCCESS` that makes a day without a folder one with no events."""
    tenant, _ = _setup(s3_server, monkeypatch, n=10)
    client = s3_server.client()
    bucket, root = layout.split_s3_uri(layout.tenant_root(tenant, "casino"))
    generate, _ = GENERATORS["casino"]
    days = [dt.date(2026, 11, d) for d in (1, 2, 3)]
    expected = {}
    for day in days[1:]:
        table = arrow_table("casino", generate(random.Random(f"parts-{day}"), tenant, day, 20))
        halves = {"a": table.slice(0, 15), "b": table.slice(15)}
        for name, part in halves.items():
            padded = name == "a" and day == days[-1]  # the last day in both forms
            folder = f"month=11/day=0{day.day}" if padded else f"month=11/day={day.day}"
            body = io.BytesIO()
            pq.write_table(part, body)
            key = f"{root}/year=2026/{folder}/part-0000{name}-c000.snappy.parquet"
            client.put_object(Bucket=bucket, Key=key, Body=body.getvalue())
            crc = key.replace("/part-", "/.part-") + ".crc"
            client.put_object(Bucket=bucket, Key=crc, Body=b"x")
        expected[day] = len(table)
    expected[days[0]] = 0  # no folder: a day with no events once the domain committed
    prefix = layout.split_s3_uri(tenant.source)[1]
    client.put_object(Bucket=bucket, Key=f"{prefix}/casino/_SUCCESS", Body=b"")
    calls = []
    source = layout.ExportSource(tenant)
    source._client.meta.events.register(
        "before-call.s3.ListObjectsV2", lambda **kwargs: calls.append(kwargs)
    )
    listed = source.list_window("casino", days)
    assert {day: export.num_rows for day, export in listed.items()} == expected
    # One walk for the window, both forms included, after one delimited listing of each folder
    # a job may commit in ({source}/{domain}/ and the tenant's): _SUCCESS, _delta_log/, metadata/.
    assert len(calls) == 3
    for day in days:
        assert load_day(fresh_clickhouse, tenant, CASINO, day, "parts").rows_loaded == expected[day]
