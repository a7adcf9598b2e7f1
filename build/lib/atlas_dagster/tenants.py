"""Tenant registry: loads and validates the clients declared in the tenants YAML file."""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from atlas_dagster.domains import DOMAINS, get_domain

TENANT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
PREFIX_RE = re.compile(r"^[A-Za-z0-9._/=-]*$")


class TenantConfigError(ValueError):
    """The tenants file declares something that cannot be loaded safely."""


@dataclass(frozen=True)
class S3Settings:
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id_env: str | None = None
    secret_access_key_env: str | None = None

    def credentials(self) -> tuple[str, str] | None:
        """Reads the keys from the environment variables the file names (never from the file)."""
        if not self.access_key_id_env:
            return None
        key = os.environ.get(self.access_key_id_env)
        secret = os.environ.get(self.secret_access_key_env or "")
        if not key or not secret:
            raise TenantConfigError(
                f"S3 credentials are not set: environment variables {self.access_key_id_env} "
                f"and {self.secret_access_key_env} must both be present"
            )
        return key, secret


@dataclass(frozen=True)
class Tenant:
    organization_id: str
    brand_id: str
    source: str  # s3://bucket/prefix or file:///absolute/path
    start_date: dt.date
    end_date: dt.date | None
    domains: tuple[str, ...]
    s3: S3Settings = field(default_factory=S3Settings)

    @property
    def key(self) -> str:
        return f"{self.organization_id}.{self.brand_id}"

    @property
    def is_s3(self) -> bool:
        return self.source.startswith("s3://")

    def last_date(self, today: dt.date | None = None) -> dt.date:
        yesterday = (today or dt.datetime.now(dt.UTC).date()) - dt.timedelta(days=1)
        return self.end_date if self.end_date else yesterday

    def covers(self, day: dt.date) -> bool:
        return self.start_date <= day <= self.last_date()


def _parse_date(raw: object, where: str, name: str) -> dt.date:
    if isinstance(raw, dt.date):
        return raw
    try:
        return dt.date.fromisoformat(str(raw))
    except ValueError as exc:
        raise TenantConfigError(f"{where}: {name} {raw!r} is not a YYYY-MM-DD date") from exc


def _parse_source(raw: object, where: str, base_dir: Path) -> str:
    source = str(raw or "").rstrip("/")
    if source.startswith("s3://"):
        bucket, _, prefix = source[5:].partition("/")
        if not BUCKET_RE.match(bucket) or not PREFIX_RE.match(prefix) or ".." in prefix:
            raise TenantConfigError(f"{where}: source {source!r} is not a valid s3://bucket/prefix")
        return source
    if source.startswith("file://"):
        path = Path(source[len("file://") :])
        if not path.is_absolute():
            raise TenantConfigError(f"{where}: source {source!r} must be file:///absolute/path")
    elif source and "://" not in source:
        # A bare path is resolved against the tenants file's folder (used by the demo tenant).
        path = (base_dir / source).resolve()
    else:
        raise TenantConfigError(f"{where}: source {source!r} must start with s3:// or file://")
    if not PREFIX_RE.match(path.as_posix()) or ".." in path.parts:
        raise TenantConfigError(f"{where}: source path {path} has characters that are not allowed")
    return f"file://{path.as_posix()}"


def _parse_tenant(entry: dict, index: int, base_dir: Path) -> Tenant:
    where = f"tenant #{index + 1}"
    if not isinstance(entry, dict):
        raise TenantConfigError(f"{where}: expected a mapping")
    for name in ("organization_id", "brand_id"):
        value = entry.get(name)
        if not isinstance(value, str) or not TENANT_ID_RE.match(value):
            raise TenantConfigError(
                f"{where} ({entry.get('organization_id')!r}/{entry.get('brand_id')!r}): {name} "
                f"{value!r} must match {TENANT_ID_RE.pattern}"
            )
    where = f"tenant {entry['organization_id']}.{entry['brand_id']}"
    domains = entry.get("domains") or list(DOMAINS)
    for domain in domains:
        try:
            get_domain(str(domain))
        except ValueError as exc:
            raise TenantConfigError(f"{where}: domains: {exc}") from exc
    start = _parse_date(entry.get("start_date"), where, "start_date")
    end = _parse_date(entry["end_date"], where, "end_date") if entry.get("end_date") else None
    if end and end < start:
        raise TenantConfigError(f"{where}: end_date {end} is before start_date {start}")
    s3_raw = entry.get("s3") or {}
    unknown = set(s3_raw) - {"endpoint_url", "region", "access_key_id_env", "secret_access_key_env"}
    if unknown:
        raise TenantConfigError(f"{where}: unknown s3 settings {sorted(unknown)}")
    return Tenant(
        organization_id=entry["organization_id"],
        brand_id=entry["brand_id"],
        source=_parse_source(entry.get("source"), where, base_dir),
        start_date=start,
        end_date=end,
        domains=tuple(str(d) for d in domains),
        s3=S3Settings(**s3_raw),
    )


def load_tenants(path: Path) -> list[Tenant]:
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError as exc:
        raise TenantConfigError(f"tenants file {path} does not exist") from exc
    entries = document.get("tenants") or []
    tenants = [_parse_tenant(entry, i, path.parent) for i, entry in enumerate(entries)]
    keys = [t.key for t in tenants]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise TenantConfigError(f"{path}: tenants declared twice: {duplicates}")
    return tenants


def tenant_by_key(tenants: list[Tenant], key: str) -> Tenant:
    for tenant in tenants:
        if tenant.key == key:
            return tenant
    raise TenantConfigError(f"tenant {key!r} is not declared in the tenants file")
