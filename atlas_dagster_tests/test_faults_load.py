"""Fault injection during a day's load, against the real engine and a real S3 server: an object
vanishing between validation and INSERT, a wrong secret at the INSERT, a full disk, and two
processes loading the same day at once. Each fault leaves a 'failed' log row with a message that
says what happened and holds no secret, no partial rows, and a re-run gives exactly the export."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import random
import secrets
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from atlas_dagster.cli.demo_data import GENERATORS, arrow_table
from atlas_dagster.domains import get_domain
from atlas_dagster.exports import layout
from atlas_dagster.loading.day_load import insert_day, prepare_day
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.tenants import Tenant
from atlas_dagster_tests.conftest import log_row
from atlas_dagster_tests.faults_support import fault_site, python
from testkit.bulk_exports import write_bulk_day
from testkit.load_support import load_day
from testkit.s3_server import S3Server, s3_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow  # real engine processes, kills and servers

DAY = dt.date(2026, 11, 5)
CASINO = get_domain("casino")
KEY_ENV = "ATLAS_FAULTS_S3_KEY_ID"
SECRET_ENV = "ATLAS_FAULTS_S3_SECRET"


def _raw_rows(clickhouse: ClickHouseResource, tenant: Tenant) -> int:
    with clickhouse.session() as client:
        return int(
            client.command(
                "SELECT count() FROM atlas.tbt_raw_events_casino FINAL WHERE organization_id = "
                "{o:String} AND brand_id = {b:String} AND event_date = {d:Date}",
                parameters={"o": tenant.organization_id, "b": tenant.brand_id, "d": DAY},
            )
        )


def _s3_day(server: S3Server, monkeypatch, users: int = 200) -> tuple[Tenant, list[str], int]:
    """A tenant reading s3://<fresh bucket>/…, its day uploaded as 2 files: (tenant, the
    files' keys, rows)."""
    bucket = f"atlas-faults-{secrets.token_hex(4)}"
    tenant = server.tenant(
        f"s3f{secrets.token_hex(3)}", f"s3://{bucket}/exports", (DAY, DAY), KEY_ENV, SECRET_ENV
    )
    monkeypatch.setenv(KEY_ENV, server.access_key_id)
    monkeypatch.setenv(SECRET_ENV, server.secret_access_key)
    generate, _ = GENERATORS["casino"]
    table = arrow_table("casino", generate(random.Random(tenant.key), tenant, DAY, users))
    rows = table.num_rows
    client = server.client()
    client.create_bucket(Bucket=bucket)
    _, prefix = layout.split_s3_uri(layout.day_folder(tenant, "casino", DAY))
    keys = []
    for index, part in enumerate((table.slice(0, rows // 2), table.slice(rows // 2))):
        body = io.BytesIO()
        pq.write_table(part, body)
        keys.append(f"{prefix}/part-{index:05d}.parquet")
        client.put_object(Bucket=bucket, Key=keys[-1], Body=body.getvalue())
    return tenant, keys, rows


def _assert_failed_cleanly(
    clickhouse: ClickHouseResource, tenant: Tenant, message: str, *hidden: str
) -> dict:
    row = log_row(clickhouse, tenant, "casino", DAY)
    assert row["status"] == "failed", row
    for secret in hidden:
        assert secret not in row["error_message"] and secret not in message
    assert _raw_rows(clickhouse, tenant) == 0  # nothing half-written
    return row


def test_an_s3_object_vanishing_after_validation_fails_the_day_then_reruns_exactly(
    s3_server: S3Server,  # noqa: F811
    tmp_path: Path,
    monkeypatch,
) -> None:
    clickhouse = ClickHouseResource(dsn=f"chdb://{tmp_path / 'clickhouse'}")
    tenant, keys, rows = _s3_day(s3_server, monkeypatch)
    prepared = prepare_day(clickhouse, tenant, CASINO, DAY, "run-1")  # validated: both files
    bucket, _ = layout.split_s3_uri(tenant.source)
    vanished = s3_server.client().get_object(Bucket=bucket, Key=keys[1])["Body"].read()
    s3_server.client().delete_object(Bucket=bucket, Key=keys[1])
    with pytest.raises(Exception) as raised:
        insert_day(clickhouse, prepared, "run-1")
    message = str(raised.value)
    row = _assert_failed_cleanly(clickhouse, tenant, message, s3_server.secret_access_key)
    assert "part-00001.parquet" in row["error_message"], row["error_message"]  # which object
    s3_server.client().put_object(Bucket=bucket, Key=keys[1], Body=vanished)
    load = load_day(clickhouse, tenant, CASINO, DAY, "run-2")
    assert load.rows_loaded == rows == _raw_rows(clickhouse, tenant)
    assert log_row(clickhouse, tenant, "casino", DAY)["status"] == "completed"


def test_a_wrong_secret_at_the_insert_fails_the_day_without_the_secret(
    s3_server: S3Server,  # noqa: F811
    tmp_path: Path,
    monkeypatch,
) -> None:
    clickhouse = ClickHouseResource(dsn=f"chdb://{tmp_path / 'clickhouse'}")
    tenant, _, _ = _s3_day(s3_server, monkeypatch)
    prepared = prepare_day(clickhouse, tenant, CASINO, DAY, "run-1")
    wrong = "WRONG-" + secrets.token_urlsafe(24)
    monkeypatch.setenv(SECRET_ENV, wrong)  # rotated between validation and INSERT
    with pytest.raises(Exception) as raised:
        insert_day(clickhouse, prepared, "run-1")
    row = _assert_failed_cleanly(
        clickhouse, tenant, str(raised.value), wrong, s3_server.secret_access_key
    )
    assert "Access Denied" in row["error_message"] or "403" in row["error_message"], row


@contextlib.contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    """A size-limited tmpfs mounted at `path`, unmounted afterwards. Mounting needs root: without
    it the test fails saying so (as the suite's other prerequisites do), never skips silently."""
    if os.geteuid() != 0:
        pytest.fail(
            "mounting a size-limited tmpfs (a disk that fills up) needs root: run the suite as "
            "root, as .ci/run does",
            pytrace=False,
        )
    path.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_disk_fails_the_day_then_a_rerun_loads_exactly(tmp_path: Path) -> None:
    site = fault_site(tmp_path, "full", DAY, DAY)
    rows = 2_000_000  # about 6 MB once stored: more than the disk has left
    write_bulk_day(site.tenant, "casino", DAY, rows)
    with small_disk(tmp_path / "disk", "3m") as disk:
        clickhouse = ClickHouseResource(dsn=f"chdb://{disk / 'clickhouse'}")
        with clickhouse.session() as client:
            ensure_schema(client)
        with pytest.raises(Exception) as raised:
            load_day(clickhouse, site.tenant, CASINO, DAY, "run-1")
        row = log_row(clickhouse, site.tenant, "casino", DAY)
        assert row["status"] == "failed", row
        assert "not enough space" in row["error_message"], row  # what happened, in the log
        assert "not enough space" in str(raised.value)
        assert _raw_rows(clickhouse, site.tenant) == 0
        # Room again (the operator grew the volume; the INSERT reserves ~220 MB up front,
        # tmpfs takes only what is written): the re-run loads exactly the export.
        subprocess.run(["mount", "-o", "remount,size=1g", str(disk)], check=True)
        load = load_day(clickhouse, site.tenant, CASINO, DAY, "run-2")
        assert load.rows_loaded == rows == _raw_rows(clickhouse, site.tenant)
        assert load.attempt == 2
        with clickhouse.session():
            pass  # closed before the unmount


CONCURRENT_LOADER = textwrap.dedent(
    """
    import datetime as dt, os, sys
    from pathlib import Path
    from atlas_dagster.domains import get_domain
    from testkit.load_support import load_day
    from atlas_dagster.resources.clickhouse import ClickHouseResource
    from atlas_dagster.resources.schema import ensure_schema
    from atlas_dagster.tenants import load_tenants
    [tenant] = load_tenants(Path(os.environ["ATLAS_TENANTS_FILE"]))
    clickhouse = ClickHouseResource(dsn=os.environ["ATLAS_CLICKHOUSE_DSN"], lock_wait_seconds=120)
    day = dt.date.fromisoformat(sys.argv[1])
    load = load_day(clickhouse, tenant, get_domain("casino"), day, f"run-{os.getpid()}")
    print("LOADED", load.rows_loaded, load.attempt)
    """
)


def test_two_processes_loading_one_day_at_once_leave_exactly_the_export(tmp_path: Path) -> None:
    site = fault_site(tmp_path, "twice", DAY, DAY)
    rows = 200_000
    write_bulk_day(site.tenant, "casino", DAY, rows)
    loaders = [python(CONCURRENT_LOADER, DAY.isoformat(), env=site.env) for _ in range(2)]
    for loader in loaders:
        assert loader.finish(timeout=300) == 0, loader.output
    results = sorted(line for p in loaders for line in p.lines if line.startswith("LOADED"))
    assert results == [f"LOADED {rows} 1", f"LOADED {rows} 2"], [p.output for p in loaders]
    clickhouse = ClickHouseResource(dsn=site.dsn)
    row = log_row(clickhouse, site.tenant, "casino", DAY)
    assert (row["status"], row["rows_loaded"], row["attempt"]) == ("completed", rows, 2)
    assert _raw_rows(clickhouse, site.tenant) == rows  # not twice the export
