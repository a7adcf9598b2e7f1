"""The tenants file refuses ids, sources and domains that could reach SQL or S3 paths unsafely."""

from pathlib import Path

import pytest

from atlas_dagster.tenants import TenantConfigError, load_tenants


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "tenants.yaml"
    path.write_text(body)
    return path


def test_loads_a_valid_tenant(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "tenants:\n  - {organization_id: acme, brand_id: main, "
        "source: s3://acme-exports/atlas, start_date: 2026-06-01, "
        "end_date: 2026-11-30, domains: [casino]}\n",
    )
    [tenant] = load_tenants(path)
    assert tenant.key == "acme.main"
    assert tenant.is_s3 and tenant.domains == ("casino",)


@pytest.mark.parametrize(
    "field,value", [("organization_id", "acme'; DROP"), ("brand_id", "../other"), ("brand_id", "")]
)
def test_refuses_unsafe_ids_naming_tenant_and_field(tmp_path: Path, field: str, value: str) -> None:
    entry = {"organization_id": "acme", "brand_id": "main"} | {field: value}
    path = _write(
        tmp_path,
        f"tenants:\n  - organization_id: {entry['organization_id']!r}\n"
        f"    brand_id: {entry['brand_id']!r}\n    source: s3://b-1/p\n"
        "    start_date: 2026-06-01\n",
    )
    with pytest.raises(TenantConfigError, match=f"tenant #1 .*{field}"):
        load_tenants(path)


def test_refuses_user_score_saying_why(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "tenants:\n  - {organization_id: acme, brand_id: main, "
        "source: s3://b-1/p, start_date: 2026-06-01, domains: [casino, user-score]}\n",
    )
    with pytest.raises(TenantConfigError, match="acme.main.*scoring worker"):
        load_tenants(path)


def test_refuses_relative_file_uri_and_unknown_scheme(tmp_path: Path) -> None:
    for source in ("file://relative/path", "http://example/x"):
        path = _write(
            tmp_path,
            f"tenants:\n  - {{organization_id: a, brand_id: b, "
            f"source: '{source}', start_date: 2026-06-01}}\n",
        )
        with pytest.raises(TenantConfigError, match="source"):
            load_tenants(path)


def test_no_tenant_is_a_clear_error_not_a_made_up_partition() -> None:
    from atlas_dagster.partitions import partitions_for

    with pytest.raises(TenantConfigError, match="lists no tenant"):
        partitions_for([])
