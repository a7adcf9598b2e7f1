"""Export layout: a tenant-day's folder, its Parquet files and their footers, local or on S3."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote

import pyarrow.parquet as pq
from dagster_aws.s3 import S3Resource

from atlas_dagster.exports.fingerprint import FileStamp, encode
from atlas_dagster.tenants import Tenant

# File names reach a ClickHouse glob: refuse anything that could widen it. Any extension: Spark,
# DuckDB and the warehouses' unloads name their files differently, some with none.
FILE_NAME_RE = re.compile(r"^[A-Za-z0-9._=-]+$")
# Hadoop's hidden-file rule, which Spark, Hive and Trino read by too: names starting with '_' or
# '.' are the writer's bookkeeping (_SUCCESS, _committed_*, .part-*.crc), never data. Every other
# file in a day folder is data and must be Parquet.
HIDDEN_PREFIXES = ("_", ".")
# What Spark, Hadoop, Databricks and Glue write where a job committed: at {source}/{domain}/ it
# declares that domain's export complete, so a day without a folder is a day with no events.
SUCCESS_MARKER = "_SUCCESS"
# Table formats whose folders keep the Parquet files of versions the table has since removed:
# a folder holding one of these beside its data is a table, not a file drop, and reading its
# files as a file drop would load deleted and superseded rows.
TABLE_FORMATS = (("_delta_log", "a Delta Lake table"), ("metadata", "an Apache Iceberg table"))
# What the folders above the day folders may hold besides them, looked for once per folder.
MARKS = frozenset({SUCCESS_MARKER, *(log for log, _ in TABLE_FORMATS)})
LAST_MARK = max(MARKS)
# Footer reads of a window (list_window) at once: each is one or two ranged GETs on S3, so
# threads overlap their latency; bounded so a window never opens more connections than this.
FOOTER_THREADS = 8


class ExportError(Exception):
    """The day's export cannot be loaded; the message names the path and the cause."""


@dataclass(frozen=True)
class ExportFile:
    uri: str  # s3://bucket/key or file:///abs/path
    name: str
    size: int
    num_rows: int
    metadata: pq.FileMetaData
    # The `name=value` folders between {source}/{domain}/ and the file (organization_id, brand_id,
    # year, month, day), as Spark and every Hive-layout reader see them: a column its writer
    # partitioned by lives only there, not in the file.
    folder_values: tuple[tuple[str, str], ...] = ()
    # What the listing says of the object (S3 ETag, or mtime in ns), and its path below the
    # tenant's folder: the file's stamp in the day's fingerprint.
    version: str = ""
    key: str = ""

    def folder_value(self, column: str) -> str | None:
        return dict(self.folder_values).get(column)

    def stamp(self) -> FileStamp:
        return FileStamp(self.key, self.size, self.version, self.num_rows)


@dataclass(frozen=True)
class DayExport:
    day_uri: str  # the day's folder
    files: tuple[ExportFile, ...]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def num_rows(self) -> int:
        return sum(f.num_rows for f in self.files)

    def fingerprint(self) -> str:
        """What the load reads, as backfill_log stores it (exports/fingerprint.py)."""
        return encode(f.stamp() for f in self.files)


class Listed(NamedTuple):
    """An object as a listing gives it: its name below the listed folder, size and version."""

    name: str
    size: int
    version: str


def tenant_root(tenant: Tenant, domain: str) -> str:
    """The folder above a tenant-domain's year=/month=/day= folders."""
    return (
        f"{tenant.source}/{domain}/organization_id={tenant.organization_id}"
        f"/brand_id={tenant.brand_id}"
    )


def day_folder(tenant: Tenant, domain: str, day: dt.date) -> str:
    """The day's folder in the contract's zero-padded form."""
    return f"{tenant_root(tenant, domain)}/year={day:%Y}/month={day:%m}/day={day:%d}"


def day_folders(tenant: Tenant, domain: str, day: dt.date) -> tuple[str, ...]:
    """Every folder the day may sit in: month= and day= with or without zero padding (Spark's
    partitionBy on integer columns writes month=9/day=7); the padded form first."""
    root = tenant_root(tenant, domain)
    months = dict.fromkeys((f"{day:%m}", str(day.month)))
    days = dict.fromkeys((f"{day:%d}", str(day.day)))
    return tuple(f"{root}/year={day:%Y}/month={month}/day={d}" for month in months for d in days)


# SQL: the day of the folder a file sits in (`_path` of a table function reading the layout),
# for queries that read many days' files at once; month= and day= padded or not.
FOLDER_DAY_SQL = (
    "makeDate(toUInt16(extract(_path, '/year=([0-9]+)/month=[0-9]+/day=[0-9]+/[^/]+$')), "
    "toUInt8(extract(_path, '/month=([0-9]+)/day=[0-9]+/[^/]+$')), "
    "toUInt8(extract(_path, '/day=([0-9]+)/[^/]+$')))"
)


def folder_values(uri: str, domain_root: str) -> tuple[tuple[str, str], ...]:
    """The `name=value` folder names of a file below `domain_root` ({source}/{domain}), values
    URL-decoded as Spark escapes them (its partition values escape `%`, `/`, `=` and the like)."""
    relative = uri[len(domain_root) + 1 :].split("/")[:-1]
    pairs = (segment.partition("=") for segment in relative)
    return tuple((name, unquote(value)) for name, sep, value in pairs if sep)


def is_data_file(name: str) -> bool:
    return not name.startswith(HIDDEN_PREFIXES)


def s3_resource(tenant: Tenant) -> S3Resource:
    """dagster-aws's S3Resource configured for one tenant's bucket and keys."""
    credentials = tenant.s3.credentials()
    return S3Resource(
        **tenant.s3.client_options(),
        aws_access_key_id=credentials[0] if credentials else None,
        aws_secret_access_key=credentials[1] if credentials else None,
    )


def split_s3_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://") :].partition("/")
    return bucket, key


class _S3RangeReader(io.RawIOBase):
    """A seekable view of an S3 object that fetches only the byte ranges pyarrow asks for."""

    def __init__(self, client: Any, bucket: str, key: str, size: int) -> None:
        self._client, self._bucket, self._key, self._size = client, bucket, key, size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        if self._pos >= self._size or len(buffer) == 0:
            return 0
        end = min(self._size, self._pos + len(buffer)) - 1
        body = self._client.get_object(
            Bucket=self._bucket, Key=self._key, Range=f"bytes={self._pos}-{end}"
        )["Body"].read()
        buffer[: len(body)] = body
        self._pos += len(body)
        return len(body)


class ExportSource:
    """Lists and opens a tenant's export files, on the local disk or through S3Resource."""

    def __init__(self, tenant: Tenant) -> None:
        self.tenant = tenant
        self._client = s3_resource(tenant).get_client() if tenant.is_s3 else None
        self._marks: dict[str, frozenset[str]] = {}

    def _levels(self, domain: str) -> tuple[str, str]:
        """Where a job writing the domain commits: {source}/{domain}/ when one job wrote every
        tenant (partitionBy("organization_id", "brand_id", …)), the tenant's own folder when a
        job per tenant did."""
        return f"{self.tenant.source}/{domain}", tenant_root(self.tenant, domain)

    def complete(self, domain: str) -> bool:
        """The domain's export is complete: the tenants file says so, or the job that wrote it
        committed a `_SUCCESS` at {source}/{domain}/ or at the tenant's own folder."""
        return self.tenant.declares_complete(domain) or any(
            SUCCESS_MARKER in self._marks_at(level) for level in self._levels(domain)
        )

    def refuse_table(self, domain: str) -> None:
        """An ExportError when the domain's folder, or the tenant's, is a Delta Lake or Iceberg
        table rather than a drop of Parquet files."""
        for level in self._levels(domain):
            for log, what in TABLE_FORMATS:
                if log in self._marks_at(level):
                    raise ExportError(
                        f"{level}/ is {what} ({log}/ beside its data): its folders also keep "
                        "the Parquet files of versions the table has removed, so they cannot be "
                        "read as an export; nothing is loaded. Export the table's current "
                        "version as plain Parquet instead (Spark: spark.read.format(...)"
                        '.load(table).write.partitionBy("organization_id", "brand_id", "year", '
                        '"month", "day").parquet(export))'
                    )

    def _marks_at(self, level: str) -> frozenset[str]:
        """Which of MARKS lie directly in the folder `level`. Read once per folder (per run, for
        a run's shared source): on S3 one delimited listing, whose key order puts them before
        any organization_id= or year= folder, so its first page almost always answers."""
        if level not in self._marks:
            if self._client:
                self._marks[level] = self._marks_s3(level)
            else:
                folder = Path(level[len("file://") :])
                self._marks[level] = frozenset(m for m in MARKS if (folder / m).exists())
        return self._marks[level]

    def _marks_s3(self, level: str) -> frozenset[str]:
        bucket, prefix = split_s3_uri(level + "/")
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix, Delimiter="/"
        )
        found: set[str] = set()
        try:
            for page in pages:
                names = [item["Key"][len(prefix) :] for item in page.get("Contents", [])]
                names += [
                    p["Prefix"][len(prefix) :].rstrip("/") for p in page.get("CommonPrefixes", [])
                ]
                found |= MARKS.intersection(names)
                if any(name > LAST_MARK for name in names):
                    break
        except Exception as exc:  # access denied, unknown bucket, network
            raise ExportError(f"cannot list {level}/: {type(exc).__name__}: {exc}") from exc
        return frozenset(found)

    def list_day(self, domain: str, day: dt.date) -> DayExport:
        """The day's files, from every form of its folder (padded or not); the union when
        several exist. No file: an empty day in a complete export, else an ExportError."""
        self.refuse_table(domain)
        return self._day_export(domain, day, self._list_day_folders(domain, day))

    def _list_day_folders(self, domain: str, day: dt.date) -> dict[str, list[Listed]]:
        folders = day_folders(self.tenant, domain, day)
        try:
            return {
                folder: self._list_s3(folder) if self._client else self._list_local(folder)
                for folder in folders
            }
        except Exception as exc:  # access denied, unknown bucket, network
            raise ExportError(f"cannot list {folders[0]}: {type(exc).__name__}: {exc}") from exc

    def list_window(
        self, domain: str, days: list[dt.date], threads: int = FOOTER_THREADS
    ) -> dict[dt.date, DayExport | ExportError]:
        """list_day for many days: one listing pass (on S3 one ListObjectsV2 walk of the window's
        key range instead of one per day), then the footers on a bounded pool of threads. Each
        day gets what list_day gives it, its DayExport or its ExportError; if the one pass
        fails, the days are listed one by one so that each names its own folder."""
        try:
            listed = self._window_listing(domain, days)
        except ExportError as exc:  # a table, or the folders above the days unreadable
            return dict.fromkeys(days, exc)

        def one(day: dt.date) -> DayExport | ExportError:
            try:
                return self._day_export(domain, day, listed(day))
            except ExportError as exc:
                return exc

        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            return dict(zip(days, pool.map(one, days), strict=True))

    def stamp_window(
        self, domain: str, days: list[dt.date]
    ) -> dict[dt.date, tuple[FileStamp, ...] | ExportError]:
        """Each day's files as list_window finds them, from the same one listing pass but with
        no footer read: their stamps (no row counts), to compare with a stored fingerprint. A
        day without files has none, whether or not the export declares it complete."""
        try:
            listed = self._window_listing(domain, days)
        except ExportError as exc:
            return dict.fromkeys(days, exc)
        stamps: dict[dt.date, tuple[FileStamp, ...] | ExportError] = {}
        for day in days:
            try:
                _, files = self._day_files(domain, day, listed(day))
            except ExportError as exc:
                stamps[day] = exc
                continue
            root = tenant_root(self.tenant, domain)
            stamps[day] = tuple(
                FileStamp(uri[len(root) + 1 :], item.size, item.version) for uri, item in files
            )
        return stamps

    def _window_listing(
        self, domain: str, days: list[dt.date]
    ) -> Callable[[dt.date], dict[str, list[Listed]]]:
        """The window's one listing pass; per day, its folders' listings (a day listed again on
        its own if the pass failed, so that it names its own folder; every day raises the
        table refusal)."""
        self.refuse_table(domain)
        folders = {f: day for day in days for f in day_folders(self.tenant, domain, day)}
        try:
            if self._client:
                by_folder = self._list_window_s3(folders)
            else:
                by_folder = self._list_window_local(domain, folders)
        except Exception:  # each day then reports its own listing error
            by_folder = None
        with contextlib.suppress(ExportError):  # read once here, not by each thread; if it
            self.complete(domain)  # fails, each day without files reports why

        def listed(day: dt.date) -> dict[str, list[Listed]]:
            if by_folder is None:
                return self._list_day_folders(domain, day)
            own = day_folders(self.tenant, domain, day)
            return {f: by_folder.get(f, []) for f in own}

        return listed

    def _day_files(
        self, domain: str, day: dt.date, entries: dict[str, list[Listed]]
    ) -> tuple[str, list[tuple[str, Listed]]]:
        """The day's folder to read from, and its data files (uri, listing) from its folders'
        listings (every form of the folder); no file at all: the padded folder, and none."""
        found = {folder: listed for folder, listed in entries.items() if listed}
        if not found:
            return day_folder(self.tenant, domain, day), []
        # Several folders of one day (month=09/day=07 and month=9/day=7): read from their
        # common parent, each file named by its path below it.
        common = os.path.commonprefix([f"{folder}/" for folder in found])
        base = common[:-1] if len(found) == 1 else os.path.dirname(common)
        seen: dict[str, str] = {}
        files = []
        for folder, listed in found.items():
            for item in sorted(listed):
                name = item.name
                if "/" in name:
                    _refuse_partition_folder(folder, name.split("/")[0])
                    continue  # any other folder inside a day's folder is not the day's data
                if not FILE_NAME_RE.fullmatch(name):
                    raise ExportError(
                        f"{folder}/{name}: file name has characters that are not allowed"
                    )
                if name in seen:
                    raise ExportError(
                        f"{folder}/{name}: the same file is also in {seen[name]}/; the day's "
                        "padded and unpadded folders must not both hold it"
                    )
                seen[name] = folder
                files.append((f"{folder}/{name}", item))
        return base, files

    def _day_export(self, domain: str, day: dt.date, entries: dict[str, list[Listed]]) -> DayExport:
        """The day's data files, their footers read. No file: an empty day in a complete export,
        else an ExportError."""
        base, files = self._day_files(domain, day, entries)
        if not files:
            if self.complete(domain):
                return DayExport(base, ())  # a day with no events
            raise ExportError(
                f"no Parquet files for the day at {base}/ (nor unpadded): not exported yet; "
                f"a day without events needs the export declared complete ({SUCCESS_MARKER} at "
                f"{self.tenant.source}/{domain}/, or export_complete in the tenants file)"
            )
        root = tenant_root(self.tenant, domain)
        exported = []
        for uri, item in files:
            rows, metadata = self._footer(uri, item.size)
            exported.append(
                ExportFile(
                    uri,
                    uri[len(base) + 1 :],
                    item.size,
                    rows,
                    metadata,
                    folder_values=folder_values(uri, f"{self.tenant.source}/{domain}"),
                    version=item.version,
                    key=uri[len(root) + 1 :],
                )
            )
        return DayExport(base, tuple(exported))

    def open(self, export_file: ExportFile) -> pq.ParquetFile:
        """Opens a file for a bounded read (footer, then the batches asked for)."""
        try:
            return pq.ParquetFile(self._handle(export_file.uri, export_file.size))
        except Exception as exc:
            raise ExportError(f"{export_file.uri}: cannot read Parquet: {exc}") from exc

    def _handle(self, uri: str, size: int) -> Any:
        if self._client:
            bucket, key = split_s3_uri(uri)
            return io.BufferedReader(_S3RangeReader(self._client, bucket, key, size), 1 << 20)
        return uri[len("file://") :]

    def _footer(self, uri: str, size: int) -> tuple[int, pq.FileMetaData]:
        try:
            metadata = pq.read_metadata(self._handle(uri, size))
        except Exception as exc:
            raise ExportError(
                f"{uri}: corrupt or unreadable Parquet: {exc} (every file of a day folder "
                "whose name does not start with '_' or '.' is read as data)"
            ) from exc
        return metadata.num_rows, metadata

    def _list_local(self, folder: str) -> list[Listed]:
        """The folder's data files, their mtime in ns as version; a data folder inside it as its
        name and '/' (refused when it is a partition folder)."""
        try:
            entries = list(os.scandir(folder[len("file://") :]))
        except (FileNotFoundError, NotADirectoryError):
            return []
        listed = []
        for entry in entries:
            if not is_data_file(entry.name):
                continue
            if entry.is_file():
                stat = entry.stat()
                listed.append(Listed(entry.name, stat.st_size, str(stat.st_mtime_ns)))
            else:
                listed.append(Listed(f"{entry.name}/", 0, ""))
        return listed

    def _list_s3(self, folder: str) -> list[Listed]:
        bucket, prefix = split_s3_uri(folder + "/")
        return [
            Listed(key[len(prefix) :], size, etag)
            for key, size, etag in self._s3_keys(bucket, prefix)
            if is_data_file(key[len(prefix) :])
        ]

    def _list_window_local(
        self, domain: str, folders: dict[str, dt.date]
    ) -> dict[str, list[Listed]]:
        """The window's day folders (every form) from one walk of the tenant's year=/month=/day=
        folders that exist, instead of trying each form of each day: a 3-year window is ~1,100
        folders visited instead of ~4,400 tried."""
        root = tenant_root(self.tenant, domain)
        years = {f"year={day:%Y}" for day in folders.values()}
        entries: dict[str, list[Listed]] = {}
        for year in _subfolders(Path(root[len("file://") :]), years):
            for month in _subfolders(year):
                for day in _subfolders(month):
                    folder = f"{root}/{year.name}/{month.name}/{day.name}"
                    if folder in folders:
                        entries[folder] = self._list_local(folder)
        return entries

    def _list_window_s3(self, folders: dict[str, dt.date]) -> dict[str, list[Listed]]:
        """The window's day folders (every form) in one walk of their common prefix, from the
        lowest folder key on and stopped after the highest. Padded keys sort by day; unpadded
        months sort 1, 10, 11, 12, 2, …, so for them the walk covers the window's years."""
        ordered = sorted(folders)
        bucket, first_key = split_s3_uri(ordered[0] + "/")
        last_key = split_s3_uri(ordered[-1] + "/")[1]
        prefix = first_key[: len(os.path.commonprefix([first_key, last_key]))]
        # Start after a name just below the lowest folder (its last digit less one): SeaweedFS
        # takes StartAfter as a folder marker and would skip the folder itself.
        start_after = first_key[:-2] + chr(ord(first_key[-2]) - 1)
        entries: dict[str, list[Listed]] = {}
        for key, size, etag in self._s3_keys(bucket, prefix, start_after=start_after):
            if key > last_key and not key.startswith(last_key):
                break
            folder, name = _in_day_folder(f"s3://{bucket}/{key}", folders)
            if folder is not None and is_data_file(name):
                entries.setdefault(folder, []).append(Listed(name, size, etag))
        return entries

    def _s3_keys(
        self, bucket: str, prefix: str, start_after: str = ""
    ) -> Iterator[tuple[str, int, str]]:
        """Every key under the prefix with its size and ETag (a new upload's version, even of
        the same size), as the listing returns them: no request per object."""
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix, StartAfter=start_after
        )
        for page in pages:
            for item in page.get("Contents", []):
                yield item["Key"], int(item["Size"]), str(item.get("ETag", "")).strip('"')


def _subfolders(path: Path, only: set[str] | None = None) -> list[Path]:
    """The folders directly in `path` (those named in `only`, when given); none if it is not a
    folder."""
    try:
        return [
            Path(entry.path)
            for entry in os.scandir(path)
            if entry.is_dir() and (only is None or entry.name in only)
        ]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _refuse_partition_folder(folder: str, inner: str) -> None:
    """A `name=value` folder inside a day's folder holds the day's rows partitioned further
    (partitionBy(…, "day", "event_type")): refused, so that they are never silently missed."""
    if "=" in inner:
        raise ExportError(
            f"{folder}/{inner}/: a partition folder inside the day's folder; a day's files sit "
            'directly in its day= folder (Spark: partitionBy with "year", "month", "day" last), '
            "so nothing of the day is loaded"
        )


def _in_day_folder(uri: str, folders: dict[str, dt.date]) -> tuple[str | None, str]:
    """The day folder an object lies in, and its path below it (with '/' when it is deeper);
    (None, uri) outside every one of them."""
    folder, name = uri.rpartition("/")[0], uri.rpartition("/")[2]
    while folder not in folders and folder.count("/") > 3:  # s3://bucket/… at least
        folder, _, parent = folder.rpartition("/")
        name = f"{parent}/{name}"
    return (folder, name) if folder in folders else (None, uri)
