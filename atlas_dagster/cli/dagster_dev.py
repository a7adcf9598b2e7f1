"""Runs `dagster dev` (webserver + daemon) on loopback for `atlas-dagster demo`; stops it after."""

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

from atlas_dagster.settings import atlas_home

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


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def serve(env: dict[str, str], log_path: Path, port: int | None = None) -> Iterator[DagsterStack]:
    """Starts `dagster dev` (webserver + daemon) with this environment; stops it after.

    The code location is the installed module (no workspace file, no checkout), run from
    ATLAS_HOME so that its relative defaults resolve as they do for the command line."""
    if not env.get("DAGSTER_HOME"):
        raise ValueError(
            "DAGSTER_HOME is not set: point it at the Dagster instance directory (with this "
            "project's dagster.yaml; `make demo` uses .dagster_home)"
        )
    port = port or free_port()
    home = Path(env["DAGSTER_HOME"])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [
        str(Path(sys.executable).parent / "dagster"),
        "dev",
        "-m",
        "atlas_dagster.definitions",
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=atlas_home(env),
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
        stop_group(process)


def stop_group(process: subprocess.Popen) -> None:
    """SIGTERM to the process group `process` leads (started with start_new_session), 30 s for
    it to end, then SIGKILL: the webserver, the daemon and their code servers go together."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
