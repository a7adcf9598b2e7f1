"""Re-delivered exports: each load stores what it read, a later listing says which completed days
changed (a file added, removed or replaced) and why, and a reload replaces the day's rows exactly
or, when the new files are refused, leaves the earlier rows in place. On local files (mtime) and
on the S3 test server (ETag)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import random
import secrets
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dagster import Definitions, build_sensor_context, instance_for_test, materialize

from atlas_dagster.assets.raw import raw_assets
from atlas_dagster.checks.changes import scan_tenant
from atlas_dagster.checks.raw import window_outcomes
from atlas_dagster.cli.demo_data import GENERATORS, arrow_table, write_day
from atlas_dagster.core.tags import SELECT_TAG, TENANT_TAG
from atlas_dagster.domains import DOMAINS
from atlas_dagster.exports import fingerprint, layout
from atlas_dagster.exports.fingerprint import FileStamp
from atlas_dagster.orchestration.redelivery import redelivery_sensor
from atlas_dagster.partitions import partitions_for
from atlas_dagster.validation.rows import RowContractError
from atlas_dagster_tests.conftest import log_row
from testkit.load_support import load_day, run_resources
from testkit.s3_server import S3Server, s3_server  # noqa: F401  (fixture)

DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(5)]
KEY_ENV, SECRET_ENV = "ATLAS_TEST_REDELIVERY_KEY", "ATLAS_TEST_REDELIVERY_SECRET"


def _rows(tenant, domain: str, day: dt.date, n: int = 12) -> list[dict]:
    return GENERATORS[domain][0](random.Random(f"redelivery-{tenant.key}-{day}"), tenant, day, n)


def _raw(clickhouse, tenant, domain: str, day: dt.date) -> tuple[int, Decimal]:
    with clickhouse.session() as client:
        count, total = client.query(
            f"SELECT count(), toString(sum(amount)) FROM atlas.{DOMAINS[domain].raw_table} "
            "FINAL WHERE organization_id = {o:String} AND brand_id = {b:String} "
            "AND event_date = {d:Date}",
            parameters={"o": tenant.organization_id, "b": tenant.brand_id, "d": day},
        ).result_rows[0]
    return int(count), Decimal(total)


def _changed(clickhouse, tenant) -> dict[tuple[str, dt.date], str]:
    with clickhouse.session() as client:
        scan = scan_tenant(client, tenant, list(tenant.domains), DAYS[0], DAYS[-1])
    assert scan.unlisted == []
    return {(c.domain, c.partition_date): c.reason for c in scan.changed}


def test_a_fingerprint_names_what_changed() -> None:
    loaded = (FileStamp("d/a.parquet", 10, "v1", 5), FileStamp("d/b.parquet", 20, "v1", 7))
    assert fingerprint.decode(fingerprint.encode(loaded)) == loaded
    assert fingerprint.decode("") is None  # loaded before fingerprints: never "changed"
    assert fingerprint.decode(fingerprint.encode(())) == ()  # a day recorded with no file
    listed = tuple(FileStamp(s.key, s.size, s.version) for s in loaded)
    assert fingerprint.changes(loaded, listed) is None  # rows are not in a listing
    assert fingerprint.changes(loaded, (listed[0], FileStamp("d/b.parquet", 20, "v2"))) == (
        "b.parquet replaced"
    )
    more = (*listed, FileStamp("d/c.parquet", 1, "v"), FileStamp("d/e.parquet", 1, "v"))
    assert fingerprint.changes(loaded, more) == "2 files added: c.parquet, e.parquet"
    assert fingerprint.changes(loaded, listed[:1]) == "b.parquet removed"
    assert fingerprint.changes((), listed) == "2 files added: a.parquet, b.parquet"


def test_changed_days_are_found_and_reloaded_exactly(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino", "transactions"), DAYS[0], DAYS[-1])
    rows = {(d, day): _rows(tenant, d, day) for d in tenant.domains for day in DAYS}
    for (domain, day), day_rows in rows.items():
        write_day(tenant, domain, day, day_rows)
        load_day(clickhouse, tenant, DOMAINS[domain], day, "first")
    assert _changed(clickhouse, tenant) == {}  # nothing re-delivered: nothing changed

    # Day 3: casino again with corrected amounts (same rows, same file names); day 4: two more
    # deposits (a file of its own); day 5: transactions without its second file.
    corrected = [r | {"amount": Decimal(r["amount"]) + 1} for r in rows[("casino", DAYS[2])]]
    write_day(tenant, "casino", DAYS[2], corrected)
    extra = _rows(tenant, "transactions", DAYS[3], 2)
    for i, row in enumerate(extra):
        row |= {"event_id": f"late-{i}", "transaction_id": f"late-{i}", "event_type": "deposit"}
    folder = Path(layout.day_folder(tenant, "transactions", DAYS[3])[len("file://") :])
    pq.write_table(arrow_table("transactions", extra), folder / "part-late.parquet")
    folder = Path(layout.day_folder(tenant, "transactions", DAYS[4])[len("file://") :])
    kept = pq.read_table(folder / "part-00000.parquet")
    (folder / "part-00001.parquet").unlink()

    assert _changed(clickhouse, tenant) == {
        ("casino", DAYS[2]): "2 files replaced: part-00000.parquet, part-00001.parquet",
        ("transactions", DAYS[3]): "part-late.parquet added",
        ("transactions", DAYS[4]): "part-00001.parquet removed",
    }
    verified = {
        (domain, day): {o.check_name: o for o in outcomes}
        for domain in tenant.domains
        for day, outcomes in window_outcomes(clickhouse, tenant, DOMAINS[domain], DAYS)
    }
    failing = {key for key, checks in verified.items() if not checks["rows_reconcile"].passed}
    assert failing == {("casino", DAYS[2]), ("transactions", DAYS[3]), ("transactions", DAYS[4])}
    assert "the export changed since the day was loaded (part-late.parquet added)" in (
        verified[("transactions", DAYS[3])]["rows_reconcile"].description
    )
    # Same rows, other values: only the stored fingerprint tells this day apart.
    assert verified[("casino", DAYS[2])]["rows_reconcile"].description.startswith(
        "the export changed since the day was loaded (2 files replaced"
    )
    before = _raw(clickhouse, tenant, "casino", DAYS[2])
    for domain, day in (("casino", DAYS[2]), ("transactions", DAYS[3]), ("transactions", DAYS[4])):
        load_day(clickhouse, tenant, DOMAINS[domain], day, "reload")
    assert _raw(clickhouse, tenant, "casino", DAYS[2]) == (before[0], before[1] + len(corrected))
    assert (
        _raw(clickhouse, tenant, "transactions", DAYS[3])[0]
        == len(rows[("transactions", DAYS[3])]) + 2
    )
    assert _raw(clickhouse, tenant, "transactions", DAYS[4])[0] == kept.num_rows  # fewer rows
    assert _changed(clickhouse, tenant) == {}  # loaded again: the fingerprints are the new files


def test_a_refused_redelivery_keeps_the_rows_it_would_have_replaced(
    clickhouse, make_tenant
) -> None:
    """The new files break a row rule the footers cannot see: the INSERT refuses them, the day
    is logged failed with the reason, and it still holds exactly the earlier delivery's rows."""
    day = DAYS[0]
    tenant = make_tenant(("casino",), day, day)
    rows = _rows(tenant, "casino", day)
    write_day(tenant, "casino", day, rows)
    load_day(clickhouse, tenant, DOMAINS["casino"], day, "first")
    loaded = _raw(clickhouse, tenant, "casino", day)

    bad = [r | {"amount": Decimal("-5")} if i == 3 else r for i, r in enumerate(rows)]
    folder = write_day(tenant, "casino", day, bad)
    for path in folder.glob("*.parquet"):  # no statistics: only a read of the rows finds it
        pq.write_table(pq.read_table(path), path, write_statistics=False)
    with pytest.raises(RowContractError, match="column amount is negative"):
        load_day(clickhouse, tenant, DOMAINS["casino"], day, "reload")

    assert _raw(clickhouse, tenant, "casino", day) == loaded
    entry = log_row(clickhouse, tenant, "casino", day)
    assert entry["status"] == "failed" and "is negative" in entry["error_message"]


@pytest.mark.slow  # the S3 test server
def test_on_s3_a_new_upload_is_a_change_and_the_same_bytes_are_not(
    s3_server: S3Server,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from atlas_dagster.resources.clickhouse import ClickHouseResource

    monkeypatch.setenv(KEY_ENV, s3_server.access_key_id)
    monkeypatch.setenv(SECRET_ENV, s3_server.secret_access_key)
    clickhouse = ClickHouseResource(dsn=f"chdb://{tmp_path / 'clickhouse'}")
    bucket = f"redelivery-{secrets.token_hex(4)}"
    tenant = s3_server.tenant(
        "s3redo", f"s3://{bucket}/x", (DAYS[0], DAYS[-1]), KEY_ENV, SECRET_ENV
    )
    client = s3_server.client()
    client.create_bucket(Bucket=bucket)

    def upload(day: dt.date, rows: list[dict]) -> None:
        body = io.BytesIO()
        pq.write_table(arrow_table("casino", rows), body)
        _, prefix = layout.split_s3_uri(layout.day_folder(tenant, "casino", day))
        client.put_object(Bucket=bucket, Key=f"{prefix}/part-0.parquet", Body=body.getvalue())

    rows = {day: _rows(tenant, "casino", day) for day in DAYS[:2]}
    for day, day_rows in rows.items():
        upload(day, day_rows)
        load_day(clickhouse, tenant, DOMAINS["casino"], day, "first")
    upload(DAYS[0], rows[DAYS[0]])  # the same bytes again: same ETag
    upload(DAYS[1], [r | {"amount": Decimal("1.5")} for r in rows[DAYS[1]]])

    assert _changed(clickhouse, tenant) == {("casino", DAYS[1]): "part-0.parquet replaced"}
    load_day(clickhouse, tenant, DOMAINS["casino"], DAYS[1], "reload")
    assert _raw(clickhouse, tenant, "casino", DAYS[1]) == (
        len(rows[DAYS[1]]),
        Decimal("1.5") * len(rows[DAYS[1]]),
    )
    assert _changed(clickhouse, tenant) == {}


@pytest.mark.slow  # a real raw run through Dagster
def test_the_sensor_reloads_the_changed_days_of_the_tenants_that_ask_for_it(
    clickhouse, make_tenant
) -> None:
    """reload_changed tenants only; one ranged run per tenant whose SELECT_TAG makes it reload
    the changed day and nothing else of its span; the same changes are requested under the same
    run_key (the daemon launches them once), and nothing once they are loaded."""
    watched = dataclasses.replace(make_tenant(("casino",), DAYS[0], DAYS[-1]), reload_changed=True)
    other = make_tenant(("casino",), DAYS[0], DAYS[-1])
    for tenant in (watched, other):
        for day in DAYS:
            write_day(tenant, "casino", day, _rows(tenant, "casino", day))
            load_day(clickhouse, tenant, DOMAINS["casino"], day, "first")
    tenants = [watched, other]
    sensor = redelivery_sensor(tenants, 60)
    definitions = Definitions(
        assets=raw_assets(tenants, partitions_for(tenants)),
        sensors=[sensor],
        resources=run_resources(clickhouse),
    )
    with instance_for_test() as instance:

        def tick():
            context = build_sensor_context(
                instance=instance, definitions=definitions, resources={"clickhouse": clickhouse}
            )
            return sensor.evaluate_tick(context)

        assert tick().run_requests == []  # nothing changed
        for tenant in (watched, other):  # days 2 and 4 of both re-delivered with more rows
            for day in (DAYS[1], DAYS[3]):
                write_day(tenant, "casino", day, _rows(tenant, "casino", day, 15))
        [request] = tick().run_requests
        assert request.tags[SELECT_TAG] == "changed" and request.tags[TENANT_TAG] == watched.key
        assert request.tags["dagster/asset_partition_range_start"] == f"{DAYS[1]}|{watched.key}"
        assert request.tags["dagster/asset_partition_range_end"] == f"{DAYS[3]}|{watched.key}"
        assert [request.run_key] == [r.run_key for r in tick().run_requests]  # launched once

        result = materialize(
            list(definitions.assets or []),
            selection=request.asset_selection,
            instance=instance,
            resources=run_resources(clickhouse),
            tags=request.tags,
        )
        assert result.success
        attempts = {day: log_row(clickhouse, watched, "casino", day)["attempt"] for day in DAYS}
        assert attempts == {d: 2 if d in (DAYS[1], DAYS[3]) else 1 for d in DAYS}
        redelivered = len(_rows(watched, "casino", DAYS[3], 15))
        assert _raw(clickhouse, watched, "casino", DAYS[3])[0] == redelivered
        # Not asked to: the other tenant's earlier rows stay as they were.
        assert _raw(clickhouse, other, "casino", DAYS[3])[0] == len(_rows(other, "casino", DAYS[3]))
        assert tick().run_requests == []
