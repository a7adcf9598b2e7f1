"""Fault injection: bad configuration. An unreachable server or an unusable chDB path gives the
CLI one clear line and a non-zero exit; a bad tenants entry is an error naming the entry."""

from __future__ import annotations

import datetime as dt
import socket
import threading
import time
from pathlib import Path

import pytest

from atlas_dagster.cli.backfill import wait_for
from atlas_dagster.cli.dagster_api import DagsterApi
from atlas_dagster.cli.dagster_dev import free_port
from atlas_dagster.core.waits import WaitTimeout
from atlas_dagster.definitions import build_definitions
from atlas_dagster.tenants import TenantConfigError, load_tenants
from atlas_dagster_tests.faults_support import cli, fault_site
from testkit.dagster_stack import write_tenants

pytestmark = pytest.mark.slow  # each case runs the CLI in its own process

DAY = dt.date(2026, 11, 6)
COMMANDS = {
    "init-db": ["init-db"],
    "status": ["status"],
    "load": ["load", "--org", "cfg", "--brand", "main", "--start", str(DAY), "--end", str(DAY)],
}


def _bad_target(kind: str, tmp_path: Path) -> tuple[str, str]:
    """(DSN, what the one line must say)."""
    if kind == "unreachable-server":
        return (
            f"http://default:s3cr3tpw@127.0.0.1:{free_port()}",
            "is unreachable: [Errno 111] Connection refused",
        )
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    return f"chdb://{blocker}/data", f"{blocker} exists and is not a directory"


@pytest.mark.parametrize("kind", ["unreachable-server", "bad-chdb-path"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_bad_target_is_one_line_and_a_non_zero_exit(
    tmp_path: Path, command: str, kind: str
) -> None:
    dsn, expected = _bad_target(kind, tmp_path)
    site = fault_site(tmp_path, "cfg", DAY, DAY, extra_env={"ATLAS_CLICKHOUSE_DSN": dsn})
    process = cli(*COMMANDS[command], env=site.env)
    code = process.finish(timeout=120)
    output = process.output
    assert code == 2, output
    assert "Traceback" not in output and "s3cr3tpw" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("atlas-dagster: ")]
    assert len(errors) == 1 and expected in errors[0], output


def _tenants(tmp_path: Path, **changes: object) -> Path:
    entry = {
        "organization_id": "acme",
        "brand_id": "main",
        "source": f"file://{tmp_path / 'exports'}",
        "start_date": "2026-11-01",
        "end_date": "2026-11-07",
        "domains": ["casino"],
    } | changes
    return write_tenants(tmp_path / "tenants.yaml", [entry])


@pytest.mark.parametrize("field", ["organization_id", "brand_id"])
def test_an_id_with_a_trailing_newline_is_a_tenants_file_error_naming_the_entry(
    tmp_path: Path, monkeypatch, field: str
) -> None:
    path = _tenants(tmp_path, **{field: "acme\n"})
    with pytest.raises(TenantConfigError) as raised:
        load_tenants(path)
    assert str(path) in str(raised.value) and "tenant #1" in str(raised.value)
    assert f"{field} 'acme\\n' must match" in str(raised.value)
    # The code location refuses it with the same error, not a Dagster traceback.
    monkeypatch.setenv("ATLAS_TENANTS_FILE", str(path))
    with pytest.raises(TenantConfigError, match="tenant #1"):
        build_definitions()


S3_BASE = {"access_key_id_env": "ACME_KEY", "secret_access_key_env": "ACME_SECRET"}


@pytest.mark.parametrize(
    ("s3", "expected"),
    [
        ({"region": "us-east-1/evil?x="}, "s3.region 'us-east-1/evil?x=' is not a region name"),
        ({"region": "eu-west-1\n"}, "is not a region name"),
        ({"region": "attacker.example.com#"}, "is not a region name"),
        ({"endpoint_url": "ftp://user:pw@host:21/"}, "must start with http:// or https://"),
        ({"endpoint_url": "http://user:pw@host:8333"}, "must not carry a user or password"),
        ({"endpoint_url": "https://host:8333/?x-amz-foo=1"}, "must not carry a query string"),
        ({"endpoint_url": "https://host:8333/#frag"}, "must not carry a query string"),
        ({"endpoint_url": "http://:8333"}, "must name a host"),
        ({"endpoint_url": "http://host:99999"}, "is not a URL"),
        ({"access_key_id_env": "KEY; rm -rf"}, "must be the name of an environment variable"),
        ({"secret_access_key_env": None}, "go together"),
        ({"regoin": "us-east-1"}, "unknown s3 settings ['regoin']"),
    ],
)
def test_bad_s3_settings_are_refused_naming_tenant_and_field(
    tmp_path: Path, s3: dict, expected: str
) -> None:
    path = _tenants(tmp_path, source="s3://acme-exports/atlas", s3=S3_BASE | s3)
    with pytest.raises(TenantConfigError) as raised:
        load_tenants(path)
    message = str(raised.value)
    assert "tenant acme.main" in message and expected in message, message
    assert ":pw@" not in message  # an endpoint's password is never echoed


def test_good_s3_settings_still_load(tmp_path: Path) -> None:
    for s3 in (
        {"region": "us-east-1"},
        {"region": "us-gov-west-1", "endpoint_url": "https://s3.example.com"},
        {"endpoint_url": "http://127.0.0.1:8333/"},
        {"endpoint_url": "https://minio.internal:9000/storage"},
    ):
        path = _tenants(tmp_path, source="s3://acme-exports/atlas", s3=S3_BASE | s3)
        [tenant] = load_tenants(path)
        assert tenant.s3.region == s3.get("region")


@pytest.mark.parametrize(
    ("s3", "url"),
    [
        ({}, "https://acme-exports.s3.us-east-1.amazonaws.com/atlas/x.parquet"),
        (
            {"region": "eu-west-1"},
            "https://acme-exports.s3.eu-west-1.amazonaws.com/atlas/x.parquet",
        ),
        (
            {"endpoint_url": "http://127.0.0.1:8333/"},
            "http://127.0.0.1:8333/acme-exports/atlas/x.parquet",
        ),
        (
            {"region": "garage", "endpoint_url": "https://minio.internal:9000/storage"},
            "https://minio.internal:9000/storage/acme-exports/atlas/x.parquet",
        ),
    ],
)
def test_endpoint_and_region_resolve_in_one_place(tmp_path: Path, s3: dict, url: str) -> None:
    """ClickHouse's s3() reads the object's URL; boto gets the tenant's endpoint and region as
    written (None: its own default)."""
    path = _tenants(tmp_path, source="s3://acme-exports/atlas", s3=S3_BASE | s3)
    [tenant] = load_tenants(path)
    assert tenant.s3.object_url("acme-exports", "atlas/x.parquet") == url
    assert tenant.s3.client_options() == {
        "endpoint_url": s3.get("endpoint_url"),
        "region_name": s3.get("region"),
    }


# A bound against a wait that never ends, far above the bounds under test (1 s, 3 s) and far
# below what a wrong wait would take (forever, or the API's own timeout of an hour): never a
# measure of speed.
HANG_SECONDS = 120.0


def _wait_for(api: DagsterApi, limit_seconds: float) -> tuple[BaseException | None, float]:
    """Runs `wait_for` on a thread; returns what it raised and how long it waited."""
    outcome: dict[str, object] = {}

    def follow() -> None:
        started = time.monotonic()
        try:
            wait_for(api, "abcdefgh", limit_seconds)
        except BaseException as exc:  # re-raised by the caller's asserts
            outcome["raised"] = exc
        outcome["waited"] = time.monotonic() - started

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    thread.join(HANG_SECONDS)
    assert not thread.is_alive(), f"still waiting {HANG_SECONDS:.0f}s into a {limit_seconds}s bound"
    return outcome.get("raised"), outcome["waited"]


def test_a_backfill_wait_with_no_webserver_reports_and_gives_up_at_its_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`backfill --wait` outlives a webserver restart within its bound, saying so as it waits,
    and at the bound gives up naming what it waited for and the last answer it had."""
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: connection refused
    with caplog.at_level("WARNING", logger="atlas_dagster.waits"):
        raised, waited = _wait_for(DagsterApi(url), limit_seconds=1.0)
    assert isinstance(raised, WaitTimeout), raised
    assert waited >= 1.0  # it kept trying until its bound
    message = str(raised)
    assert "gave up waiting for backfill abcdefgh to finish" in message
    assert f"it goes on without this wait: {url}/runs/b/abcdefgh" in message
    assert f"no Dagster webserver answers at {url}" in message
    assert "waiting for backfill abcdefgh to finish" in caplog.text


def test_a_backfill_wait_ends_at_its_bound_when_the_webserver_never_answers() -> None:
    """A webserver that takes the request and never answers (hung, overloaded) cannot stretch
    the wait past its bound: each request may only take the time left, not the API's timeout
    (an hour here, so that only the bound can end the wait before HANG_SECONDS)."""
    with socket.create_server(("127.0.0.1", 0)) as server:  # accepts, never replies
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        raised, waited = _wait_for(DagsterApi(url, timeout=3600.0), limit_seconds=3.0)
    assert isinstance(raised, WaitTimeout), raised
    assert waited >= 3.0, f"gave up after {waited:.1f}s of a 3 s bound"
    assert "timed out" in str(raised)
