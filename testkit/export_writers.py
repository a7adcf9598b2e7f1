"""The tools clients export with, as test helpers: each writes a tenant-day of events the way
DuckDB, polars or pandas (pyarrow and fastparquet engines) does by default, and pyarrow writes
the forms no such tool produces on its own: INT96 with nanoseconds, DECIMAL(38,4) without
statistics, one day in padded and unpadded folders. Real Spark is in spark_exports.py. Used by
test_export_writers.py and bench/bench_writers.py."""

from __future__ import annotations

import datetime as dt
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from atlas_dagster.domains import DOMAINS, Kind
from atlas_dagster.exports.layout import SUCCESS_MARKER, day_folder, tenant_root
from atlas_dagster.tenants import Tenant

# A single-digit month and day: the padded and unpadded folders differ.
DAYS = (dt.date(2026, 9, 6), dt.date(2026, 9, 7))
ROWS = 60
# Nanoseconds before midnight: stored as 23:59:59.999999, on its own day.
LAST_NANOSECOND = pd.Timestamp("2026-09-07 23:59:59.999999999", tz="UTC")

Writer = Callable[[Tenant, str, dt.date, pa.Table], None]


def _folder(tenant: Tenant, domain: str, day: dt.date, padded: bool = True) -> Path:
    uri = (
        day_folder(tenant, domain, day)
        if padded
        else f"{tenant_root(tenant, domain)}/year={day.year}/month={day.month}/day={day.day}"
    )
    folder = Path(uri[len("file://") :])
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _money_columns(domain: str) -> list[str]:
    return [c.name for c in DOMAINS[domain].extra_columns if c.kind is Kind.MONEY]


def _cast(table: pa.Table, name: str, to: pa.DataType) -> pa.Table:
    index = table.schema.get_field_index(name)
    return table.set_column(index, pa.field(name, to), table.column(name).cast(to))


def _wide_table(table: pa.Table, domain: str) -> pa.Table:
    """DECIMAL(38,4) money (Spark's, Snowflake's), microsecond timestamps."""
    for name in _money_columns(domain):
        table = _cast(table, name, pa.decimal128(38, 4))
    return _cast(table, "event_timestamp", pa.timestamp("us", tz="UTC"))


def _job_file_name(index: int) -> str:
    return f"part-{index:05d}-{uuid.uuid4()}-c000.snappy.parquet"


def _sidecars(folder: Path, name: str) -> None:
    """What Hadoop-based writers leave beside their files: a checksum each, the commit marker."""
    (folder / f".{name}.crc").write_bytes(b"crc\x00\x01")
    (folder / SUCCESS_MARKER).write_bytes(b"")


def _pandas_frame(table: pa.Table, domain: str) -> pd.DataFrame:
    """As a pandas job holds the events: nanosecond UTC timestamps, money as float64, one event
    at the last nanosecond of the last day."""
    frame = table.to_pandas()
    frame["event_timestamp"] = frame["event_timestamp"].astype("datetime64[ns, UTC]")
    for name in _money_columns(domain):
        frame[name] = frame[name].astype("float64")
    if frame["event_timestamp"].iloc[0].date() == LAST_NANOSECOND.date():
        frame.loc[0, "event_timestamp"] = LAST_NANOSECOND
    return frame


def write_duckdb(tenant: Tenant, domain: str, day: dt.date, table: pa.Table) -> None:
    # COPY ... TO with DuckDB's defaults (TIMESTAMPTZ in µs, DECIMAL(18,4)), zstd, row groups
    # of 2,048 rows (DuckDB's smallest), so a day spans several.
    connection = duckdb.connect()
    connection.register("events", table)
    path = _folder(tenant, domain, day) / "data_0.parquet"
    connection.execute(
        f"COPY events TO '{path}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 2048)"
    )
    connection.close()


def write_polars(tenant: Tenant, domain: str, day: dt.date, table: pa.Table) -> None:
    pl.from_arrow(table).write_parquet(_folder(tenant, domain, day) / "00000.parquet")


def write_pyarrow_many(tenant: Tenant, domain: str, day: dt.date, table: pa.Table) -> None:
    """5 files and an empty one, columns in another order, an extra column, brotli."""
    folder = _folder(tenant, domain, day)
    shuffled = table.select(list(reversed(table.column_names)))
    shuffled = shuffled.append_column("exported_by", pa.array(["etl"] * len(table)))
    chunk = -(-len(table) // 5)
    for index in range(5):
        part = shuffled.slice(index * chunk, chunk)
        pq.write_table(part, folder / f"part-{index}.parquet", compression="brotli")
    pq.write_table(shuffled.slice(0, 0), folder / "part-empty.parquet")


def write_micros_no_statistics(tenant: Tenant, domain: str, day: dt.date, table: pa.Table) -> None:
    """INT64 µs, DECIMAL(38,4), and no statistics at all (no tool here writes none), sidecars."""
    folder = _folder(tenant, domain, day)
    name = _job_file_name(0)
    pq.write_table(_wide_table(table, domain), folder / name, write_statistics=False)
    _sidecars(folder, name)


def write_pandas(tenant: Tenant, domain: str, day: dt.date, table: pa.Table) -> None:
    frame = _pandas_frame(table, domain)
    frame.to_parquet(_folder(tenant, domain, day) / "part.0.parquet", engine="pyarrow")


def write_fastparquet(tenant: Tenant, domain: str, day: dt.date, table: pa.Table) -> None:
    frame = _pandas_frame(table, domain)
    with warnings.catch_warnings():  # pandas announces the engine's deprecation
        warnings.simplefilter("ignore")
        frame.to_parquet(_folder(tenant, domain, day) / "part.0.parquet", engine="fastparquet")


def write_int96_nanoseconds(tenant: Tenant, domain: str, day: dt.date, table: pa.Table) -> None:
    """INT96 timestamps carrying nanoseconds (Spark's INT96 stops at µs; Impala's does not),
    DECIMAL(38,4), sidecars."""
    folder = _folder(tenant, domain, day)
    wide = _wide_table(table, domain)
    nanos = _cast(wide, "event_timestamp", pa.timestamp("ns", tz="UTC"))
    if day == LAST_NANOSECOND.date():
        stamps = nanos.column("event_timestamp").to_pylist()
        stamps[0] = LAST_NANOSECOND
        index = nanos.schema.get_field_index("event_timestamp")
        column = pa.array(stamps, pa.timestamp("ns", tz="UTC"))
        nanos = nanos.set_column(index, nanos.schema.field(index), column)
    name = _job_file_name(0)
    pq.write_table(nanos, folder / name, use_deprecated_int96_timestamps=True)
    _sidecars(folder, name)


def write_unpadded_and_padded(tenant: Tenant, domain: str, day: dt.date, table: pa.Table) -> None:
    """Unpadded month=9/day=7 folders, as partitionBy on integers writes; the last day also has
    a padded folder (a re-export by another tool): the day is the union of both."""
    half = len(table) // 2
    both = day == DAYS[-1]
    unpadded = _folder(tenant, domain, day, padded=False)
    pq.write_table(table.slice(half) if both else table, unpadded / _job_file_name(0))
    if both:
        pq.write_table(table.slice(0, half), _folder(tenant, domain, day) / _job_file_name(1))


def write_complete_export(tenant: Tenant, domain: str, day: dt.date, table: pa.Table) -> None:
    """The job committed (_SUCCESS per domain); transactions had no event on the first day, so
    the job wrote no folder for it."""
    (Path(tenant.source[len("file://") :]) / domain).mkdir(parents=True, exist_ok=True)
    (Path(tenant.source[len("file://") :]) / domain / SUCCESS_MARKER).write_bytes(b"")
    if (domain, day) != ("transactions", DAYS[0]):
        pq.write_table(table, _folder(tenant, domain, day) / "part-0.parquet")


WRITERS: dict[str, Writer] = {
    "duckdb": write_duckdb,
    "polars": write_polars,
    "pyarrow-5-files-empty-shuffled-extra-brotli": write_pyarrow_many,
    "micros-decimal-38-4-no-statistics": write_micros_no_statistics,
    "pandas-pyarrow-ns": write_pandas,
    "pandas-fastparquet-ns": write_fastparquet,
    "int96-nanoseconds-decimal-38-4": write_int96_nanoseconds,
    "unpadded-and-padded-folders": write_unpadded_and_padded,
    "complete-export-empty-day": write_complete_export,
}
EMPTY_DAY_WRITER = "complete-export-empty-day"
NANOSECOND_WRITERS = (
    "pandas-pyarrow-ns",
    "pandas-fastparquet-ns",
    "int96-nanoseconds-decimal-38-4",
)
