"""Transient faults retried inside the run, permanent ones not: real runs (in-process Dagster,
a fresh instance and engine each) against the real S3 server behind a fault-injecting proxy on
loopback, and real chDB errors (TOO_MANY_PARTS from a tiny parts_to_throw_insert)."""

from __future__ import annotations

import datetime as dt
import io
import random
import re
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance, instance_for_test

from atlas_dagster.cli.demo_data import GENERATORS, arrow_table, write_day
from atlas_dagster.domains import DOMAINS
from atlas_dagster.exports import layout
from atlas_dagster.loading.day_load import count_day
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.tenants import Tenant
from atlas_dagster_tests.conftest import log_row
from testkit.gold_support import materialize_range
from testkit.s3_proxy import FaultPlan, s3_proxy
from testkit.s3_server import S3Server, s3_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow  # real runs, a real S3 server

KEY_ENV = "ATLAS_RETRY_S3_KEY_ID"
SECRET_ENV = "ATLAS_RETRY_S3_SECRET"
FIRST = dt.date(2026, 10, 1)


def _days(count: int) -> list[dt.date]:
    return [FIRST + dt.timedelta(days=i) for i in range(count)]


@pytest.fixture
def fast_retries(monkeypatch) -> None:
    """Short waits between tries (the defaults are seconds); same number of tries."""
    monkeypatch.setenv("ATLAS_RETRY_BASE_SECONDS", "0.2")
    monkeypatch.setenv("ATLAS_RETRY_MAX_SECONDS", "2")


def _run(clickhouse, tenant: Tenant, instance: DagsterInstance, domains: tuple[str, ...], days):
    return materialize_range(clickhouse, tenant, list(domains), instance, days[0], days[-1])


def _lines(instance: DagsterInstance, run_id: str) -> list[str]:
    return [e.user_message for e in instance.all_logs(run_id) if not e.is_dagster_event]


def _count(clickhouse, tenant: Tenant, domain: str, day: dt.date) -> int:
    with clickhouse.session() as client:
        return count_day(client, DOMAINS[domain], tenant, day)


def _s3_tenant(server: S3Server, endpoint: str, days: list[dt.date], domains) -> Tenant:
    bucket = f"atlas-retry-{secrets.token_hex(4)}"
    tenant = server.tenant(
        f"r{secrets.token_hex(3)}",
        f"s3://{bucket}/exports",
        (days[0], days[-1]),
        KEY_ENV,
        SECRET_ENV,
    )
    server.client().create_bucket(Bucket=bucket)
    return Tenant(
        tenant.organization_id,
        tenant.brand_id,
        tenant.source,
        tenant.start_date,
        tenant.end_date,
        tuple(domains),
        type(tenant.s3)(endpoint, tenant.s3.region, KEY_ENV, SECRET_ENV),
    )


def _upload(server: S3Server, tenant: Tenant, domain: str, day: dt.date, users: int) -> int:
    generate, _ = GENERATORS[domain]
    table = arrow_table(domain, generate(random.Random(f"{tenant.key}{day}"), tenant, day, users))
    bucket, prefix = layout.split_s3_uri(layout.day_folder(tenant, domain, day))
    half = table.num_rows // 2
    for index, part in enumerate((table.slice(0, half), table.slice(half))):
        body = io.BytesIO()
        pq.write_table(part, body)
        server.client().put_object(
            Bucket=bucket, Key=f"{prefix}/part-{index:05d}.parquet", Body=body.getvalue()
        )
    return table.num_rows


@pytest.fixture
def s3_keys(s3_server: S3Server, monkeypatch) -> Iterator[S3Server]:  # noqa: F811
    monkeypatch.setenv(KEY_ENV, s3_server.access_key_id)
    monkeypatch.setenv(SECRET_ENV, s3_server.secret_access_key)
    yield s3_server


def test_a_storm_of_503s_and_resets_ends_in_no_failed_day_and_exact_rows(
    s3_keys: S3Server, tmp_path: Path, fast_retries
) -> None:
    """Half of all GETs answered 503 SlowDown, a sixth reset mid-body (the issue's storm):
    the libraries' own retries absorb most; what they cannot (a reset while boto3 reads a
    footer's body) is retried by the run, which says so."""
    days, domains = _days(8), ("casino", "transactions")
    plan = FaultPlan(slowdown_every=2, reset_every=6, cut_once=True)
    clickhouse = ClickHouseResource(dsn=f"chdb://{tmp_path / 'clickhouse'}")
    with s3_proxy(s3_keys.endpoint_url, plan) as proxy, instance_for_test() as instance:
        tenant = _s3_tenant(s3_keys, proxy.endpoint_url, days, domains)
        expected = {(d, day): _upload(s3_keys, tenant, d, day, 60) for d in domains for day in days}
        # A HEAD through the proxy says the object's real size (ClickHouse reads an object
        # whose HEAD says 0 bytes as 0 rows, silently).
        bucket, key = layout.split_s3_uri(layout.day_folder(tenant, "casino", days[0]))
        key += "/part-00000.parquet"
        direct = s3_keys.client().head_object(Bucket=bucket, Key=key)["ContentLength"]
        proxied = S3Server(proxy.endpoint_url, s3_keys.access_key_id, s3_keys.secret_access_key)
        assert proxied.client().head_object(Bucket=bucket, Key=key)["ContentLength"] == direct > 0
        started = time.monotonic()
        result = _run(clickhouse, tenant, instance, domains, days)
        seconds = time.monotonic() - started
        lines = _lines(instance, result.run_id)
    retries = [line for line in lines if " failed, transient (" in line]
    print(
        f"\nstorm: {plan.gets} GETs, {plan.slowdowns} answered 503, {plan.resets} reset "
        f"({plan.cuts} mid-body); "
        f"{len(retries)} retries of ours; run {seconds:.1f}s"
    )
    for line in retries:
        print("  " + line[:220])
    assert plan.slowdowns == plan.gets // 2 - plan.gets // 6 and plan.resets == plan.gets // 6
    assert result.success, [line for line in lines if "failed" in line]
    for (domain, day), rows in expected.items():
        entry = log_row(clickhouse, tenant, domain, day)
        assert entry["status"] == "completed", entry
        assert entry["rows_loaded"] == rows == _count(clickhouse, tenant, domain, day)
    assert retries, "the storm never reached past the libraries' retries: nothing of ours shown"
    # Each try is visible in backfill_log: a day failed n times completed at attempt n + 1.
    failed_tries: dict[tuple[str, dt.date], int] = {}
    for line in retries:
        found = re.match(r"tbt_raw_events_(\w+) (\S+)\|\S+: try (\d) of", line)
        assert found, line
        key = (found.group(1), dt.date.fromisoformat(found.group(2)))
        failed_tries[key] = max(failed_tries.get(key, 0), int(found.group(3)))
    for (domain, day), tries in failed_tries.items():
        assert log_row(clickhouse, tenant, domain, day)["attempt"] == tries + 1
    for line in retries:
        assert "retry 2 in" in line or "retry 3 in" in line or "retry 4 in" in line


def _file_tenant(tmp_path: Path, days: list[dt.date], org: str) -> Tenant:
    return Tenant(org, "main", f"file://{tmp_path / 'exports'}", days[0], days[-1], ("casino",))


def _write(tenant: Tenant, day: dt.date, users: int = 40) -> int:
    generate, _ = GENERATORS["casino"]
    rows = generate(random.Random(f"{tenant.key}{day}"), tenant, day, users)
    write_day(tenant, "casino", day, rows)
    return len(rows)


def _active_parts(client) -> int:
    return int(
        client.command(
            "SELECT count() FROM system.parts WHERE active AND database = 'atlas' "
            "AND table = 'tbt_raw_events_casino' AND partition_id = '202610'"
        )
    )


def test_too_many_parts_is_retried_until_merges_catch_up(tmp_path: Path, fast_retries) -> None:
    """A raw table refusing INSERTs above 4 parts (TOO_MANY_PARTS, 252) with 4 already there:
    the first try of the newest day fails on the engine; once merges catch up (OPTIMIZE, run
    when the failure is logged: embedded chDB does not merge between queries, measured: 5
    parts stayed 5 for 10 s) its retry loads it, and every day ends completed and exact."""
    days = _days(3)
    tenant = _file_tenant(tmp_path, days, "parts")
    expected = {day: _write(tenant, day) for day in days}
    clickhouse = ClickHouseResource(dsn=f"chdb://{tmp_path / 'clickhouse'}")
    with clickhouse.session() as client:
        ensure_schema(client)
        for n in range(4):  # another tenant's rows, one part each, in the days' partition
            client.command(
                "INSERT INTO atlas.tbt_raw_events_casino (organization_id, brand_id, event_date,"
                " event_id) VALUES ('other', 'main', '2026-10-20', {id:String})",
                parameters={"id": f"e{n}"},
            )
        client.command(
            "ALTER TABLE atlas.tbt_raw_events_casino MODIFY SETTING parts_to_throw_insert = 4"
        )
        assert _active_parts(client) == 4
    done, merges = threading.Event(), []

    def merge_when_refused() -> None:
        """The merges catching up: after each refused try, the partition merged to one part."""
        seen = 0
        with clickhouse.session() as client:
            while not done.wait(0.05):
                refused = int(
                    client.command(
                        "SELECT countIf(status = 'failed') FROM atlas.backfill_log "
                        "WHERE organization_id = 'parts'"
                    )
                )
                if refused > seen and _active_parts(client) >= 4:
                    client.command("OPTIMIZE TABLE atlas.tbt_raw_events_casino FINAL")
                    merges.append(time.monotonic())
                seen = refused

    merger = threading.Thread(target=merge_when_refused)
    with instance_for_test() as instance, clickhouse.kept_open():
        merger.start()
        try:
            result = _run(clickhouse, tenant, instance, ("casino",), days)
        finally:
            done.set()
            merger.join(timeout=30)
        lines = _lines(instance, result.run_id)
    retries = [line for line in lines if "TOO_MANY_PARTS (252)" in line and "retry 2 in" in line]
    assert result.success, [line for line in lines if "failed" in line]
    assert retries and merges, lines
    for day, rows in expected.items():
        entry = log_row(clickhouse, tenant, "casino", day)
        assert (entry["status"], entry["rows_loaded"]) == ("completed", rows), entry
        assert _count(clickhouse, tenant, "casino", day) == rows
    assert log_row(clickhouse, tenant, "casino", days[-1])["attempt"] >= 2  # the newest, first


def test_permanent_faults_fail_at_their_first_try_with_no_retry(
    s3_keys: S3Server, tmp_path: Path, fast_retries, monkeypatch
) -> None:
    """A contract violation (a negative amount) and a wrong secret: failed at try 1, logged
    attempt 1, no retry line, and the run log says why it was not retried."""
    days = _days(1)
    local = _file_tenant(tmp_path, days, "contract")
    generate, _ = GENERATORS["casino"]
    rows = generate(random.Random("contract"), local, days[0], 30)
    rows[5]["amount"] = -rows[5]["amount"] - 1
    write_day(local, "casino", days[0], rows)
    remote = _s3_tenant(s3_keys, s3_keys.endpoint_url, days, ("casino",))
    _upload(s3_keys, remote, "casino", days[0], 30)
    monkeypatch.setenv(SECRET_ENV, "WRONG-" + secrets.token_urlsafe(16))
    clickhouse = ClickHouseResource(dsn=f"chdb://{tmp_path / 'clickhouse'}")
    for tenant, why in ((local, "is negative"), (remote, "SignatureDoesNotMatch")):
        with instance_for_test() as instance:
            result = _run(clickhouse, tenant, instance, ("casino",), days)
            lines = _lines(instance, result.run_id)
        assert not result.success
        entry = log_row(clickhouse, tenant, "casino", days[0])
        assert (entry["status"], entry["attempt"]) == ("failed", 1), entry
        assert why in entry["error_message"], entry["error_message"]
        assert not [line for line in lines if "retry 2 in" in line], lines
        failed = [line for line in lines if " failed at try 1, permanent (" in line]
        assert failed and "not retried" in failed[0], lines


def test_a_transient_fault_that_persists_fails_the_day_at_its_last_try(
    tmp_path: Path, fast_retries, monkeypatch
) -> None:
    """TOO_MANY_PARTS with no merge ever: 3 tries (ATLAS_RETRY_ATTEMPTS=3), each logged, then
    'failed' with the last cause at attempt 3 and nothing of the day kept."""
    monkeypatch.setenv("ATLAS_RETRY_ATTEMPTS", "3")
    days = _days(1)
    tenant = _file_tenant(tmp_path, days, "stuck")
    _write(tenant, days[0])
    clickhouse = ClickHouseResource(dsn=f"chdb://{tmp_path / 'clickhouse'}")
    with clickhouse.session() as client:
        ensure_schema(client)
        client.command(
            "ALTER TABLE atlas.tbt_raw_events_casino MODIFY SETTING parts_to_throw_insert = 1"
        )
        client.command(
            "INSERT INTO atlas.tbt_raw_events_casino (organization_id, brand_id, event_date, "
            "event_id) VALUES ('other', 'main', '2026-10-20', 'e')"
        )
    with instance_for_test() as instance:
        result = _run(clickhouse, tenant, instance, ("casino",), days)
        lines = _lines(instance, result.run_id)
    assert not result.success
    assert [line for line in lines if "retry 2 in" in line or "retry 3 in" in line]
    assert not [line for line in lines if "retry 4 in" in line]
    [final] = [line for line in lines if " failed after 3 tries, the last transient (" in line]
    assert "TOO_MANY_PARTS" in final
    entry = log_row(clickhouse, tenant, "casino", days[0])
    assert (entry["status"], entry["attempt"]) == ("failed", 3), entry
    assert "TOO_MANY_PARTS" in entry["error_message"]
    assert _count(clickhouse, tenant, "casino", days[0]) == 0
