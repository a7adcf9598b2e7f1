"""Runs `dagster dev` (webserver + daemon) on loopback: for the demo, tests and benchmarks."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from atlas_dagster.settings import PROJECT_ROOT

READY_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class DagsterStack:
    url: str
    home: Path
    env: dict[str, str]
    log_path: Path
    pid: int = 0  # the `dagster dev` process: its descendants are the daemon, servers and runs

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_tenants(path: Path, tenants: list[dict]) -> Path:
    path.write_text(yaml.safe_dump({"tenants": tenants}))
    return path


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def isolated_env(work: Path, tenants_file: Path, extra_env: dict[str, str] | None = None) -> dict:
    """A new DAGSTER_HOME (with the project's dagster.yaml) and embedded engine under `work`."""
    home = work / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text((PROJECT_ROOT / "dagster.yaml").read_text())
    return os.environ | {
        "DAGSTER_HOME": str(home),
        "ATLAS_TENANTS_FILE": str(tenants_file),
        "ATLAS_CLICKHOUSE_DSN": f"chdb://{work / 'clickhouse'}",
        **(extra_env or {}),
    }


@contextlib.contextmanager
def run_dagster_dev(
    work: Path, tenants_file: Path, extra_env: dict[str, str] | None = None
) -> Iterator[DagsterStack]:
    """Starts `dagster dev` on a fresh instance and engine under `work`; stops it after."""
    with serve(isolated_env(work, tenants_file, extra_env), work / "dagster-dev.log") as stack:
        yield stack


@contextlib.contextmanager
def serve(env: dict[str, str], log_path: Path, port: int | None = None) -> Iterator[DagsterStack]:
    """Starts `dagster dev` (webserver + daemon) with this environment; stops it after."""
    port = port or free_port()
    home = Path(env["DAGSTER_HOME"])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [
        str(Path(sys.executable).parent / "dagster"),
        "dev",
        "-w",
        str(PROJECT_ROOT / "workspace.yaml"),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=PROJECT_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    stack = DagsterStack(f"http://127.0.0.1:{port}", home, env, log_path, process.pid)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while not _ready(stack.url):
            if process.poll() is not None:
                raise RuntimeError(
                    f"dagster dev exited ({process.returncode}):\n{stack.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"dagster dev not ready after {READY_TIMEOUT_SECONDS}s:\n{stack.log_tail()}"
                )
            time.sleep(0.5)
        yield stack
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
