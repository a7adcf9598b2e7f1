"""Export layout: a tenant-day's folder, its Parquet files and their footers, local or on S3."""

from __future__ import annotations

import datetime as dt
import io
import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from dagster_aws.s3 import S3Resource

from atlas_dagster.tenants import Tenant

# File names reach a ClickHouse glob: refuse anything that could widen it.
FILE_NAME_RE = re.compile(r"^[A-Za-z0-9._=-]+\.parquet$")
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


def day_folder(tenant: Tenant, domain: str, day: dt.date) -> str:
    return (
        f"{tenant.source}/{domain}/organization_id={tenant.organization_id}"
        f"/brand_id={tenant.brand_id}/year={day:%Y}/month={day:%m}/day={day:%d}"
    )


# SQL: the day of the folder a file sits in (`_path` of a table function reading the layout),
# for queries that read many days' files at once.
FOLDER_DAY_SQL = (
    "toDate(replaceRegexpOne(_path, "
    "'^.*/year=([0-9]+)/month=([0-9]+)/day=([0-9]+)/[^/]+$', '\\\\1-\\\\2-\\\\3'))"
)


def s3_resource(tenant: Tenant) -> S3Resource:
    """dagster-aws's S3Resource configured for one tenant's bucket and keys."""
    credentials = tenant.s3.credentials()
    return S3Resource(
        region_name=tenant.s3.region,
        endpoint_url=tenant.s3.endpoint_url,
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

    def list_day(self, domain: str, day: dt.date) -> DayExport:
        folder = day_folder(self.tenant, domain, day)
        try:
            entries = self._list_s3(folder) if self._client else self._list_local(folder)
        except ExportError:
            raise
        except Exception as exc:  # access denied, unknown bucket, network
            raise ExportError(f"cannot list {folder}: {type(exc).__name__}: {exc}") from exc
        return self._day_export(folder, entries)

    def list_window(
        self, domain: str, days: list[dt.date], threads: int = FOOTER_THREADS
    ) -> dict[dt.date, DayExport | ExportError]:
        """list_day for many days: one listing pass (on S3 one ListObjectsV2 walk of the window's
        key range instead of one per day), then the footers on a bounded pool of threads. Each
        day gets what list_day gives it, its DayExport or its ExportError; if the one pass
        fails, the days are listed one by one so that each names its own folder."""
        folders = {day_folder(self.tenant, domain, day): day for day in days}
        try:
            by_folder = self._list_window_s3(folders) if self._client else None
        except Exception:  # each day then reports its own listing error
            by_folder = None

        def one(folder: str) -> DayExport | ExportError:
            try:
                if by_folder is None:
                    return self.list_day(domain, folders[folder])
                return self._day_export(folder, by_folder.get(folder, []))
            except ExportError as exc:
                return exc

        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            return dict(zip(folders.values(), pool.map(one, folders), strict=True))

    def _day_export(self, folder: str, entries: list[tuple[str, int]]) -> DayExport:
        if not entries:
            raise ExportError(f"no Parquet files for the day at {folder}/")
        files = []
        for name, size in sorted(entries):
            if not FILE_NAME_RE.fullmatch(name):
                raise ExportError(f"{folder}/{name}: file name has characters that are not allowed")
            uri = f"{folder}/{name}"
            files.append(ExportFile(uri, name, size, *self._footer(uri, size)))
        return DayExport(folder, tuple(files))

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
            raise ExportError(f"{uri}: corrupt or unreadable Parquet: {exc}") from exc
        return metadata.num_rows, metadata

    def _list_local(self, folder: str) -> list[tuple[str, int]]:
        path = Path(folder[len("file://") :])
        if not path.is_dir():
            return []
        return [(p.name, p.stat().st_size) for p in path.iterdir() if p.suffix == ".parquet"]

    def _list_s3(self, folder: str) -> list[tuple[str, int]]:
        bucket, prefix = split_s3_uri(folder + "/")
        return [
            (key[len(prefix) :], size)
            for key, size in self._s3_keys(bucket, prefix)
            if "/" not in key[len(prefix) :] and key.endswith(".parquet")
        ]

    def _list_window_s3(self, folders: dict[str, dt.date]) -> dict[str, list[tuple[str, int]]]:
        """The window's day folders in one walk of their common prefix, from the oldest day's
        key on and stopped after the newest (zero-padded year=/month=/day= keys sort by day)."""
        ordered = sorted(folders)
        bucket, first_key = split_s3_uri(ordered[0] + "/")
        last_key = split_s3_uri(ordered[-1] + "/")[1]
        prefix = first_key[: len(os.path.commonprefix([first_key, last_key]))]
        # Start after a name just below the oldest day's folder (its last digit less one):
        # SeaweedFS takes StartAfter as a folder marker and would skip the folder itself.
        start_after = first_key[:-2] + chr(ord(first_key[-2]) - 1)
        entries: dict[str, list[tuple[str, int]]] = {}
        for key, size in self._s3_keys(bucket, prefix, start_after=start_after):
            if key > last_key and not key.startswith(last_key):
                break
            folder, _, name = f"s3://{bucket}/{key}".rpartition("/")
            if folder in folders and name.endswith(".parquet"):
                entries.setdefault(folder, []).append((name, size))
        return entries

    def _s3_keys(
        self, bucket: str, prefix: str, start_after: str = ""
    ) -> Iterator[tuple[str, int]]:
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix, StartAfter=start_after
        )
        for page in pages:
            for item in page.get("Contents", []):
                yield item["Key"], int(item["Size"])
