"""Tenant registry: loads and validates the clients declared in the tenants YAML file."""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from atlas_dagster.domains import DOMAINS, get_domain

TENANT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
PREFIX_RE = re.compile(r"^[A-Za-z0-9._/=-]*$")
# AWS regions (us-east-1, eu-central-2, us-gov-west-1) and S3-compatible ones (a name such as
# "garage"): never '/', '?', '.' or '@', since the region is placed into the host name.
REGION_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+){0,4}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
HOST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
ENDPOINT_PATH_RE = re.compile(r"^[A-Za-z0-9._/-]*$")
# The region of an AWS object URL when the tenants file names none (AWS's own default).
DEFAULT_REGION = "us-east-1"
S3_FIELDS = ("endpoint_url", "region", "access_key_id_env", "secret_access_key_env")


class TenantConfigError(ValueError):
    """The tenants file declares something that cannot be loaded safely."""


@dataclass(frozen=True)
class S3Settings:
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id_env: str | None = None
    secret_access_key_env: str | None = None

    def object_url(self, bucket: str, key: str) -> str:
        """The object's HTTP URL (what ClickHouse's s3() reads): path-style under the tenant's
        endpoint, else AWS's virtual-hosted URL in the tenant's region."""
        if self.endpoint_url:
            return f"{self.endpoint_url.rstrip('/')}/{bucket}/{key}"
        return f"https://{bucket}.s3.{self.region or DEFAULT_REGION}.amazonaws.com/{key}"

    def client_options(self) -> dict[str, str | None]:
        """The endpoint and region an S3 client (boto3, dagster-aws) is given: the tenant's, or
        None for the client's own default."""
        return {"endpoint_url": self.endpoint_url, "region_name": self.region}

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
class DomainWindow:
    """A domain's own dates inside its tenant's window (a sportsbook launched a year after the
    casino has no days before its launch), and whether its export is declared complete."""

    start_date: dt.date | None = None  # None: the tenant's
    end_date: dt.date | None = None  # None: the tenant's
    export_complete: bool | None = None  # None: the tenant's setting


@dataclass(frozen=True)
class Tenant:
    organization_id: str
    brand_id: str
    source: str  # s3://bucket/prefix or file:///absolute/path
    start_date: dt.date
    end_date: dt.date | None
    domains: tuple[str, ...]
    s3: S3Settings = field(default_factory=S3Settings)
    # Per-domain windows and completeness, in tenants-file order; a domain not named here
    # follows the tenant. A tuple of pairs, so that the tenant stays hashable.
    domain_windows: tuple[tuple[str, DomainWindow], ...] = ()
    # Declares every domain's export complete (as a `_SUCCESS` file at {source}/{domain}/ does):
    # a day without files is then a day with no events, not a day not exported yet.
    export_complete: bool = False
    # Lets the daemon reload, by itself, loaded days whose export was delivered again with other
    # files (orchestration/redelivery.py); off: an operator runs `--only-changed`.
    reload_changed: bool = False

    @property
    def key(self) -> str:
        return f"{self.organization_id}.{self.brand_id}"

    @property
    def is_s3(self) -> bool:
        return self.source.startswith("s3://")

    def last_date(self, today: dt.date | None = None) -> dt.date:
        yesterday = (today or dt.datetime.now(dt.UTC).date()) - dt.timedelta(days=1)
        return self.end_date if self.end_date else yesterday

    def covers(self, day: dt.date, domain: str | None = None, today: dt.date | None = None) -> bool:
        """The day is in the tenant's window, and in `domain`'s own window when one is named."""
        first, last = self.window(domain, today)
        return first <= day <= last

    def _domain_window(self, domain: str | None) -> DomainWindow:
        return dict(self.domain_windows).get(domain or "", DomainWindow())

    def window(
        self, domain: str | None = None, today: dt.date | None = None
    ) -> tuple[dt.date, dt.date]:
        """(first, last) day of the tenant, or of one of its domains."""
        own = self._domain_window(domain)
        last = self.last_date(today)
        return own.start_date or self.start_date, min(own.end_date or last, last)

    def declares_complete(self, domain: str) -> bool:
        """The tenants file says the domain's export is complete (no `_SUCCESS` needed)."""
        own = self._domain_window(domain).export_complete
        return self.export_complete if own is None else own


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
        if not BUCKET_RE.fullmatch(bucket) or not PREFIX_RE.fullmatch(prefix) or ".." in prefix:
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
    if not PREFIX_RE.fullmatch(path.as_posix()) or ".." in path.parts:
        raise TenantConfigError(f"{where}: source path {path} has characters that are not allowed")
    return f"file://{path.as_posix()}"


def _endpoint_problem(url: str) -> str | None:
    """Why an S3 endpoint URL is refused: the s3() URL is built from it, so only a plain
    http(s)://host[:port][/path] is accepted (credentials travel as bound keys, never in it)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"is not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "must not carry a user or password (name the key variables instead)"
    if parts.query or parts.fragment or url.rstrip("?#") != url:
        return "must not carry a query string or fragment"
    host = parts.hostname or ""
    if host.startswith("[") or ":" in host:
        host = ""  # IPv6 literals are not needed on loopback or in a VPC; refused for simplicity
    if not HOST_RE.fullmatch(host) or port == 0:
        return "must name a host (letters, digits, '.', '-') and optionally a port"
    if not ENDPOINT_PATH_RE.fullmatch(parts.path) or ".." in parts.path.split("/"):
        return "has a path with characters that are not allowed"
    return None


def _parse_s3(raw: object, where: str) -> S3Settings:
    if raw is None:
        return S3Settings()
    if not isinstance(raw, dict):
        raise TenantConfigError(f"{where}: s3 must be a mapping of {list(S3_FIELDS)}")
    unknown = set(raw) - set(S3_FIELDS)
    if unknown:
        raise TenantConfigError(f"{where}: unknown s3 settings {sorted(unknown)}")
    values: dict[str, str | None] = {}
    for name in S3_FIELDS:
        value = raw.get(name)
        if value is not None and not isinstance(value, str):
            raise TenantConfigError(f"{where}: s3.{name} must be a string, not {value!r}")
        values[name] = value or None
    endpoint, region = values["endpoint_url"], values["region"]
    if endpoint is not None and (problem := _endpoint_problem(endpoint)):
        # The value is not echoed: it may hold a password.
        raise TenantConfigError(f"{where}: s3.endpoint_url {problem}")
    if region is not None and not REGION_RE.fullmatch(region):
        raise TenantConfigError(
            f"{where}: s3.region {region!r} is not a region name (like us-east-1: lower-case "
            "letters, digits and '-')"
        )
    for name in ("access_key_id_env", "secret_access_key_env"):
        value = values[name]
        if value is not None and not ENV_NAME_RE.fullmatch(value):
            raise TenantConfigError(
                f"{where}: s3.{name} {value!r} must be the name of an environment variable"
            )
    if bool(values["access_key_id_env"]) != bool(values["secret_access_key_env"]):
        raise TenantConfigError(
            f"{where}: s3.access_key_id_env and s3.secret_access_key_env go together"
        )
    return S3Settings(**values)


def _parse_tenant(entry: dict, index: int, base_dir: Path) -> Tenant:
    where = f"tenant #{index + 1}"
    if not isinstance(entry, dict):
        raise TenantConfigError(f"{where}: expected a mapping")
    for name in ("organization_id", "brand_id"):
        value = entry.get(name)
        if not isinstance(value, str) or not TENANT_ID_RE.fullmatch(value):
            raise TenantConfigError(
                f"{where} ({entry.get('organization_id')!r}/{entry.get('brand_id')!r}): {name} "
                f"{value!r} must match {TENANT_ID_RE.pattern}"
            )
    where = f"tenant {entry['organization_id']}.{entry['brand_id']}"
    start = _parse_date(entry.get("start_date"), where, "start_date")
    end = _parse_date(entry["end_date"], where, "end_date") if entry.get("end_date") else None
    if end and end < start:
        raise TenantConfigError(f"{where}: end_date {end} is before start_date {start}")
    windows = [_parse_domain(d, where, start, end) for d in entry.get("domains") or list(DOMAINS)]
    names = [name for name, _ in windows]
    if len(set(names)) != len(names):
        raise TenantConfigError(f"{where}: domains lists a domain twice: {names}")
    return Tenant(
        organization_id=entry["organization_id"],
        brand_id=entry["brand_id"],
        source=_parse_source(entry.get("source"), where, base_dir),
        start_date=start,
        end_date=end,
        domains=tuple(names),
        s3=_parse_s3(entry.get("s3"), where),
        domain_windows=tuple((n, w) for n, w in windows if w != DomainWindow()),
        export_complete=_parse_flag(entry.get("export_complete"), where, "export_complete")
        or False,
        reload_changed=_parse_flag(entry.get("reload_changed"), where, "reload_changed") or False,
    )


DOMAIN_FIELDS = ("name", "start_date", "end_date", "export_complete")


def _parse_flag(raw: object, where: str, name: str) -> bool | None:
    if raw is None or isinstance(raw, bool):
        return raw
    raise TenantConfigError(f"{where}: {name} must be true or false, not {raw!r}")


def _parse_domain(
    raw: object, where: str, start: dt.date, end: dt.date | None
) -> tuple[str, DomainWindow]:
    """A domains entry: a name, or a mapping {name, start_date, end_date, export_complete}
    whose dates lie inside the tenant's window."""
    fields = raw if isinstance(raw, dict) else {"name": raw}
    unknown = set(fields) - set(DOMAIN_FIELDS)
    if unknown:
        raise TenantConfigError(f"{where}: domains: unknown settings {sorted(unknown)}")
    name = str(fields.get("name"))
    try:
        get_domain(name)
    except ValueError as exc:
        raise TenantConfigError(f"{where}: domains: {exc}") from exc
    at = f"{where}: domain {name}"
    own_start, own_end = (
        _parse_date(fields[name], at, name) if fields.get(name) else None
        for name in ("start_date", "end_date")
    )
    if own_start and own_start < start:
        raise TenantConfigError(f"{at}: start_date {own_start} is before the tenant's {start}")
    if own_end and end and own_end > end:
        raise TenantConfigError(f"{at}: end_date {own_end} is after the tenant's {end}")
    if own_end and own_end < (own_start or start):
        raise TenantConfigError(f"{at}: end_date {own_end} is before its start_date")
    complete = _parse_flag(fields.get("export_complete"), at, "export_complete")
    return name, DomainWindow(own_start, own_end, complete)


def load_tenants(path: Path) -> list[Tenant]:
    """The tenants of the file; any problem is a TenantConfigError naming the file and entry."""
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError as exc:
        raise TenantConfigError(f"tenants file {path} does not exist") from exc
    except yaml.YAMLError as exc:
        raise TenantConfigError(f"tenants file {path} is not valid YAML: {exc}") from exc
    entries = document.get("tenants") if isinstance(document, dict) else None
    if not isinstance(entries or [], list):
        raise TenantConfigError(f"tenants file {path}: 'tenants' must be a list of tenants")
    try:
        tenants = [_parse_tenant(entry, i, path.parent) for i, entry in enumerate(entries or [])]
    except TenantConfigError as exc:
        raise TenantConfigError(f"tenants file {path}: {exc}") from None
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
