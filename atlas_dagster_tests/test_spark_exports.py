"""Exports written by real Spark (pyspark on Java 17) load exactly with `atlas-dagster load`:
Spark's defaults partitioned by the tenant columns (which then live only in the folder names),
and a warehouse-shaped job per tenant (TIMESTAMP_MICROS, integer ids, double money), from local
files and from the S3 test server. Every day's rows equal what Spark was given, every gold metric
equals pyarrow's computation to the cent, and `verify --layer all` passes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest
from dagster import DagsterInstance, materialize
from pyspark.sql import SparkSession

from atlas_dagster.cli.main import main
from atlas_dagster.definitions import build_definitions
from atlas_dagster.domains import DOMAINS, Kind
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.partitions import partition_key
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import S3Settings, Tenant
from atlas_dagster_tests.conftest import log_row
from testkit import gold_reference as reference
from testkit.dagster_stack import DAGSTER_YAML, tenant_entry, write_tenants
from testkit.gold_support import assert_gold_to_the_cent, generated
from testkit.s3_server import S3Server, s3_server  # noqa: F401  (fixture)
from testkit.spark_exports import (
    spark_session,
    warehouse_row,
    write_spark_defaults,
    write_warehouse_style,
)

pytestmark = pytest.mark.slow  # one Spark session for the module, then loads and gold runs

# Single-digit month and days: Spark's partitionBy writes month=9/day=1, unpadded.
DAYS = [dt.date(2026, 9, 1) + dt.timedelta(days=i) for i in range(5)]
# No transactions that day: Spark writes no folder for it, and its _SUCCESS says it is empty.
EMPTY = ("transactions", DAYS[2])
ROWS = 30
LOOKBACK = 90
KEY_ENV, SECRET_ENV = "ATLAS_TEST_SPARK_S3_KEY", "ATLAS_TEST_SPARK_S3_SECRET"


@dataclass(frozen=True)
class Written:
    """What Spark was given, per tenant: {domain: {day: rows}}."""

    defaults: dict[str, Tenant]  # two brands of one organization, written by one job
    warehouse: Tenant
    rows: dict[str, dict[str, dict[dt.date, list[dict]]]]
    defaults_source: Path


def _tenant(org: str, brand: str, source: Path) -> Tenant:
    return Tenant(org, brand, f"file://{source}", DAYS[0], DAYS[-1], tuple(DOMAINS))


def _rows(tenant: Tenant) -> dict[str, dict[dt.date, list[dict]]]:
    return {
        domain: {
            day: [] if (domain, day) == EMPTY else generated(tenant, domain, day, ROWS)
            for day in DAYS
        }
        for domain in DOMAINS
    }


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Written]:
    root = tmp_path_factory.mktemp("spark")
    defaults_source = root / "databricks"
    defaults = {brand: _tenant("acme-br", brand, defaults_source) for brand in ("main_1", "main_2")}
    warehouse = _tenant("acme-wh", "main", root / "warehouse")
    rows = {t.key: _rows(t) for t in [*defaults.values(), warehouse]}
    with spark_session(root) as spark:
        # The writer is Spark itself (pyspark 4 driving its JVM), not an imitation of its layout.
        assert isinstance(spark, SparkSession) and spark.version.startswith("4."), spark.version
        for domain in DOMAINS:
            everyone = [r for t in defaults.values() for d in DAYS for r in rows[t.key][domain][d]]
            write_spark_defaults(spark, defaults_source, domain, everyone)
            ours = [r for d in DAYS for r in rows[warehouse.key][domain][d]]
            write_warehouse_style(spark, warehouse, domain, ours)
    yield Written(defaults, warehouse, rows, defaults_source)


def _environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tenants: list[Tenant | dict]
) -> ClickHouseResource:
    """A fresh engine and Dagster instance, the CLI pointed at them and at `tenants`."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML.read_text())
    dsn = f"chdb://{tmp_path / 'clickhouse'}"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("ATLAS_TENANTS_FILE", str(write_tenants(tmp_path / "t.yaml", tenants)))
    monkeypatch.setenv("ATLAS_CLICKHOUSE_DSN", dsn)
    return ClickHouseResource(dsn=dsn)


def _cli(command: str, tenant: Tenant, *extra: str) -> int:
    return main([command, "--org", tenant.organization_id, "--brand", tenant.brand_id, *extra])


def _stored(value: object, kind: Kind) -> object:
    """A value Spark was given, as the raw table stores it."""
    if value is None:
        return None
    if kind is Kind.ID:
        return str(value)  # an integer id: its exact decimal text
    if kind is Kind.MONEY:
        return Decimal(repr(value) if isinstance(value, float) else value).quantize(
            Decimal("0.0001")
        )
    if kind is Kind.TIMESTAMP:
        return value.astimezone(dt.UTC)
    return value


def _raw_rows(clickhouse: ClickHouseResource, tenant: Tenant, domain: str, day: dt.date) -> dict:
    names = [c.name for c in DOMAINS[domain].columns]
    with clickhouse.session() as client:
        result = client.query(
            f"SELECT {', '.join(names)} FROM atlas.{DOMAINS[domain].raw_table} FINAL "
            "WHERE organization_id = {o:String} AND brand_id = {b:String} "
            "AND event_date = {d:Date}",
            parameters={"o": tenant.organization_id, "b": tenant.brand_id, "d": day},
        )
    stored = {}
    for row in result.result_rows:
        record = dict(zip(names, row, strict=True))
        record["event_timestamp"] = record["event_timestamp"].astimezone(dt.UTC)
        stored[record["event_id"]] = record
    return stored


def _expected_rows(domain: str, rows: list[dict], warehouse: bool) -> dict:
    expected = {}
    for row in rows:
        given = warehouse_row(domain, row) if warehouse else row
        record = {c.name: _stored(given.get(c.name), c.kind) for c in DOMAINS[domain].columns}
        record["event_type"] = record["event_type"].strip().lower()
        record["currency"] = record["currency"].upper() if record.get("currency") else None
        if domain == "user" and record["currency"] is None:
            del record["currency"]
        expected[record["event_id"]] = record
    return expected


def _assert_rows_exact(
    clickhouse: ClickHouseResource, tenant: Tenant, written: Written, warehouse: bool
) -> None:
    for domain in DOMAINS:
        for day in DAYS:
            given = written.rows[tenant.key][domain][day]
            entry = log_row(clickhouse, tenant, domain, day)
            assert (entry["status"], entry["rows_loaded"]) == ("completed", len(given)), (
                domain,
                day,
                entry,
            )
            stored = _raw_rows(clickhouse, tenant, domain, day)
            expected = _expected_rows(domain, given, warehouse)
            for record in stored.values():
                if domain == "user" and record.get("currency") in (None, ""):
                    record.pop("currency")
            assert stored == expected, (domain, day)


def _replay_gold(tenant: Tenant) -> None:
    """The gold assets over the window, through Dagster as automation requests them."""
    definitions = build_definitions()
    with DagsterInstance.get() as instance:
        result = materialize(
            list(definitions.assets or []),
            selection=list(GOLD_TABLES),
            instance=instance,
            resources=definitions.resources,
            tags={
                "dagster/asset_partition_range_start": partition_key(DAYS[0], tenant.key),
                "dagster/asset_partition_range_end": partition_key(DAYS[-1], tenant.key),
            },
        )
    assert result.success


def _assert_gold_to_the_cent(clickhouse: ClickHouseResource, tenant: Tenant) -> None:
    """Gold against gold_reference's pyarrow computation over the files Spark wrote."""
    assert_gold_to_the_cent(clickhouse, tenant, DAYS, LOOKBACK)
    assert reference.ggr(tenant, DAYS[0])  # the reference read Spark's files: not empty


def test_spark_defaults_partitioned_by_tenant_load_exactly(
    written: Written, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    first, second = written.defaults.values()
    clickhouse = _environment(tmp_path, monkeypatch, [first, second])

    for command in (("check-export",), ("backfill", "--dry-run")):
        assert _cli(*command[:1], first, *command[1:]) == 0
        report = capsys.readouterr().out
        assert "organization_id, brand_id: not in the file, from its folders" in report, command
        assert "event_timestamp: INT96 (Spark/Hive/Impala legacy)" in report, command
        assert "amount: DECIMAL(38, 4) → read as Decimal(38, 4)" in report, command
    assert "refused before any INSERT (listing and footers): 0 tenant-day(s)" in report

    assert _cli("load", first) == 0
    _assert_rows_exact(clickhouse, first, written, warehouse=False)
    # One job wrote both brands: loading the first took none of the second's rows.
    for domain in DOMAINS:
        with clickhouse.session() as client:
            brands = client.query(
                f"SELECT DISTINCT brand_id FROM atlas.{DOMAINS[domain].raw_table}"
            ).result_rows
        assert brands in ([("main_1",)], []), domain
    assert _cli("load", second) == 0
    _assert_rows_exact(clickhouse, second, written, warehouse=False)

    _replay_gold(first)
    _assert_gold_to_the_cent(clickhouse, first)
    assert _cli("verify", first, "--layer", "all") == 0


def test_warehouse_style_spark_job_with_integer_ids_loads_exactly(
    written: Written, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    tenant = written.warehouse
    clickhouse = _environment(tmp_path, monkeypatch, [tenant])

    assert _cli("check-export", tenant) == 0
    report = capsys.readouterr().out
    assert "user_id: INT64 (int64) → String, its exact decimal digits" in report
    assert "bet_id: DECIMAL(20, 0) → String, its exact decimal digits" in report
    assert "amount: DOUBLE → Decimal(18, 4)" in report
    assert "not in the file" not in report  # the tenant columns are in these files

    assert _cli("load", tenant) == 0
    _assert_rows_exact(clickhouse, tenant, written, warehouse=True)
    with clickhouse.session() as client:
        [(shapes,)] = client.query(
            "SELECT groupUniqArray(match(user_id, '^900719925474[0-9]{4}$')) "
            "FROM atlas.tbt_raw_events_transactions"
        ).result_rows
    assert shapes == [1]  # above 2^53, every digit kept: never 9.007199254741e15

    _replay_gold(tenant)
    _assert_gold_to_the_cent(clickhouse, tenant)
    assert _cli("verify", tenant, "--layer", "all") == 0


def test_spark_defaults_load_from_s3(
    written: Written,
    s3_server: S3Server,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spark's output copied as it is to the S3 server: the tenant columns come from the key's
    folder names, and the job's _SUCCESS at {domain}/ is found by a listing."""
    monkeypatch.setenv(KEY_ENV, s3_server.access_key_id)
    monkeypatch.setenv(SECRET_ENV, s3_server.secret_access_key)
    bucket = f"spark-{tmp_path.name.lower().replace('_', '-')[-20:]}"
    client = s3_server.client()
    client.create_bucket(Bucket=bucket)
    for path in written.defaults_source.rglob("*"):
        if path.is_file():
            key = f"exports/{path.relative_to(written.defaults_source)}"
            client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    local = written.defaults["main_1"]
    tenant = Tenant(
        local.organization_id,
        local.brand_id,
        f"s3://{bucket}/exports",
        DAYS[0],
        DAYS[-1],
        tuple(DOMAINS),
        S3Settings(s3_server.endpoint_url, s3_server.region, KEY_ENV, SECRET_ENV),
    )
    entry = tenant_entry(tenant) | {
        "s3": {
            "endpoint_url": s3_server.endpoint_url,
            "region": s3_server.region,
            "access_key_id_env": KEY_ENV,
            "secret_access_key_env": SECRET_ENV,
        }
    }
    clickhouse = _environment(tmp_path, monkeypatch, [entry])

    assert _cli("load", tenant) == 0
    for domain in DOMAINS:
        for day in DAYS:
            given = written.rows[local.key][domain][day]
            logged = log_row(clickhouse, tenant, domain, day)
            assert (logged["status"], logged["rows_loaded"]) == ("completed", len(given))
            stored = _raw_rows(clickhouse, tenant, domain, day)
            assert {r["organization_id"] for r in stored.values()} <= {"acme-br"}
            assert {r["brand_id"] for r in stored.values()} <= {"main_1"}
            assert len(stored) == len(given)
