"""Real Spark writing clients' exports, for the tests and the writers' benchmark: pyspark on
Debian's Java 17 (scripts/ensure-system-deps installs openjdk-17-jre-headless), local, on
loopback, one session per test module (its start costs seconds: a session per test would
cost minutes in `make test`).

Two ways of writing that clients use, each as Spark itself writes it:
- `write_spark_defaults`: a Databricks job's defaults, one job for every tenant:
  `partitionBy("organization_id", "brand_id", "year", "month", "day").parquet({source}/{domain})`
  with INT96 timestamps, DECIMAL(38,4) money, unpadded `month=9/day=1`, `part-…c000.snappy
  .parquet`, `.crc` files and the job's `_SUCCESS` at `{domain}/`; the tenant columns live only
  in the folder names.
- `write_warehouse_style`: a job per tenant writing a warehouse-shaped frame: TIMESTAMP_MICROS,
  ids as BIGINT / INT / DECIMAL(20,0), money as DOUBLE, `partitionBy("year", "month", "day")`
  under the tenant's own folder, its `_SUCCESS` there.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import shutil
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from atlas_dagster.domains import DOMAINS, Kind
from atlas_dagster.exports.layout import tenant_root
from atlas_dagster.tenants import Tenant

# user_id as written by the warehouse form: above 2^53, so a double could not hold it exactly.
USER_ID_BASE = 9_007_199_254_740_993
# The id columns the warehouse form writes as integers, and how (Spark SQL types).
INTEGER_IDS = {"user_id": "bigint", "transaction_id": "bigint", "bet_id": "decimal(20,0)"}
SMALL_IDS = {"game_id": "int"}


def java_home() -> str:
    """Where Debian's Java is, for pyspark; a missing Java fails the test with its remedy."""
    java = shutil.which("java")
    if java:
        return str(Path(os.path.realpath(java)).parent.parent)
    found = sorted(Path("/usr/lib/jvm").glob("*/bin/java"))
    if found:
        return str(found[-1].parent.parent)
    pytest.fail(
        "no Java for pyspark: run scripts/ensure-system-deps (as root it installs Debian's "
        "openjdk-17-jre-headless), as `make test` and .ci/run do"
    )


@contextlib.contextmanager
def spark_session(work: Path) -> Iterator[object]:
    """A local SparkSession on loopback, its scratch under `work`; stopped after."""
    os.environ.setdefault("JAVA_HOME", java_home())
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("atlas-dagster-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.local.dir", str(work / "spark-local"))
        .config("spark.sql.warehouse.dir", str(work / "spark-warehouse"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()


def _spark_type(name: str, kind: Kind, warehouse: bool) -> str:
    if warehouse and name in INTEGER_IDS:
        return INTEGER_IDS[name]
    if warehouse and name in SMALL_IDS:
        return SMALL_IDS[name]
    if kind is Kind.TIMESTAMP:
        return "timestamp"
    if kind is Kind.MONEY:
        return "double" if warehouse else "decimal(38,4)"
    if kind is Kind.DOUBLE:
        return "double"
    return "string"


def _ddl(domain: str, warehouse: bool) -> str:
    columns = [
        f"{c.name} {_spark_type(c.name, c.kind, warehouse)}" for c in DOMAINS[domain].columns
    ]
    return ", ".join([*columns, "year int", "month int", "day int"])


def integer_id(name: str, value: str) -> int:
    """The warehouse form's integer for one of the generator's text ids (u123 → above 2^53,
    cas-20260901-5 → 202609015, slot-7 → 7): one text, one integer."""
    digits = int(re.sub(r"\D", "", value))
    return USER_ID_BASE + digits if name == "user_id" else digits


def warehouse_row(domain: str, row: dict) -> dict:
    """A generator row as the warehouse form holds it: integer ids, money as doubles."""
    out = dict(row)
    for column in DOMAINS[domain].columns:
        value = out.get(column.name)
        if value is None:
            continue
        if column.name in INTEGER_IDS or column.name in SMALL_IDS:
            number = integer_id(column.name, value)
            out[column.name] = Decimal(number) if column.name == "bet_id" else number
        elif column.kind is Kind.MONEY:
            out[column.name] = float(value)
    return out


def _frame(spark, domain: str, rows: list[dict], warehouse: bool):
    names = [c.name for c in DOMAINS[domain].columns]
    records = []
    for row in rows:
        stamp: dt.datetime = row["event_timestamp"]
        day = stamp.astimezone(dt.UTC).date()
        record = warehouse_row(domain, row) if warehouse else row
        records.append((*(record.get(n) for n in names), day.year, day.month, day.day))
    return spark.createDataFrame(records, schema=_ddl(domain, warehouse))


def write_spark_defaults(spark, source: Path, domain: str, rows: list[dict]) -> Path:
    """One job for every tenant of `rows`: Spark's defaults, partitioned by the tenant columns
    and the day (which are then only in the folder names). Returns the job's output folder."""
    output = source / domain
    frame = _frame(spark, domain, rows, warehouse=False)
    frame.write.mode("overwrite").partitionBy(
        "organization_id", "brand_id", "year", "month", "day"
    ).parquet(str(output))
    return output


def write_warehouse_style(
    spark, tenant: Tenant, domain: str, rows: list[dict], committed: bool = True
) -> Path:
    """A job for one tenant: TIMESTAMP_MICROS, integer ids, double money, the tenant columns in
    the files, partitioned by the day under the tenant's folder (its _SUCCESS there)."""
    output = Path(tenant_root(tenant, domain)[len("file://") :])
    frame = _frame(spark, domain, rows, warehouse=True)
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    try:
        frame.write.mode("overwrite").partitionBy("year", "month", "day").parquet(str(output))
    finally:
        spark.conf.unset("spark.sql.parquet.outputTimestampType")
    if not committed:
        (output / "_SUCCESS").unlink()
    return output
