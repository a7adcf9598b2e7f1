"""Export layout: a tenant-day's folder, its Parquet files and their footers, local or on S3."""

from __future__ import annotations

import datetime as dt
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from dagster_aws.s3 import S3Resource

from atlas_dagster.tenants import Tenant

# File names reach a ClickHouse glob: refuse anything that could widen it.
FILE_NAME_RE = re.compile(r"^[A-Za-z0-9._=-]+\.parquet$")


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
        entries: list[tuple[str, int]] = []
        for page in self._client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix
        ):
            for item in page.get("Contents", []):
                name = item["Key"][len(prefix) :]
                if "/" not in name and name.endswith(".parquet"):
                    entries.append((name, int(item["Size"])))
        return entries
