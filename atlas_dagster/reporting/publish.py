"""Where a tenant's report is written: a local folder or an s3:// prefix, with the tenant's keys."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from atlas_dagster.exports.layout import s3_resource, split_s3_uri
from atlas_dagster.reporting.collect import TenantReport
from atlas_dagster.reporting.render import as_csv, as_html, as_json
from atlas_dagster.settings import SettingsError
from atlas_dagster.tenants import PREFIX_RE, Tenant

FILES = {
    "progress.html": ("text/html; charset=utf-8", as_html),
    "progress.json": ("application/json", as_json),
    "progress.csv": ("text/csv; charset=utf-8", as_csv),
}


@dataclass(frozen=True)
class Published:
    folder: str  # a local path or s3://bucket/prefix
    files: tuple[str, ...]

    @property
    def html(self) -> str:
        return f"{self.folder}/progress.html"


def tenant_folder(location: str, tenant: Tenant) -> str:
    """The location with {source} replaced by the tenant's export source (the report then lands
    beside the client's own export), else the location's subfolder organization_id/brand_id."""
    if "{source}" in location:
        folder = location.replace("{source}", tenant.source)
    else:
        folder = f"{location}/{tenant.organization_id}/{tenant.brand_id}"
    if folder.startswith("file://"):
        folder = folder[len("file://") :]
    checked = folder[len("s3://") :] if folder.startswith("s3://") else folder
    if not PREFIX_RE.fullmatch(checked) or ".." in checked.split("/"):
        raise SettingsError(
            f"ATLAS_REPORTS_LOCATION gives {tenant.key} the folder {folder!r}, which has "
            "characters that are not allowed"
        )
    return folder


def render_files(report: TenantReport) -> dict[str, tuple[str, str]]:
    """File name → (content type, text)."""
    return {name: (kind, render(report)) for name, (kind, render) in FILES.items()}


def publish(report: TenantReport, tenant: Tenant, folder: str) -> Published:
    """Writes the three files; on S3 with the tenant's own endpoint, region and keys."""
    files = render_files(report)
    if folder.startswith("s3://"):
        client = s3_resource(tenant).get_client()
        bucket, prefix = split_s3_uri(folder.rstrip("/") + "/")
        for name, (kind, text) in files.items():
            client.put_object(
                Bucket=bucket, Key=prefix + name, Body=text.encode("utf-8"), ContentType=kind
            )
    else:
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        for name, (_, text) in files.items():
            # Written whole then renamed, so a reader never opens half a page.
            partial = path / f".{name}.partial"
            partial.write_text(text, encoding="utf-8")
            partial.replace(path / name)
    return Published(folder.rstrip("/"), tuple(files))
