"""Helpers of the fault-injection suite (test_faults_*.py): real CLI processes, real lock
holders, a fresh instance and engine per test; processes are killed for real (SIGKILL)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from atlas_dagster.tenants import Tenant, load_tenants
from testkit.dagster_stack import write_tenants

CLI = str(Path(sys.executable).parent / "atlas-dagster")

# Holds the engine's file lock (as another atlas-dagster process would), naming itself run
# "holder". Each waiter entry (<pid>-<thread>) written to <control>/pass-<i> is let through once
# (a `load` checks the engine in its main thread before its run starts); then the holder takes
# the engine back while that process's run goes on and waits for it. Only the named entry is let
# through, never another thread's of the same process. Every pass ends with one line, "retaken"
# or "no waiter": a waiter seen by the test may be gone by the time the holder looks (CI once
# hung here for 120 s when the holder waited for such a waiter without a bound).
LOCK_HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from atlas_dagster.resources.embedded_engine import (
        acquire_file_lock, other_waiters, release_file_lock,
    )
    data_dir, control = Path(sys.argv[1]), Path(sys.argv[2])
    handle = acquire_file_lock(data_dir, 60, run_id="holder")
    print("held", flush=True)
    for index in range(1000):
        order = control / f"pass-{index}"
        while not order.exists():
            time.sleep(0.01)
        entry, deadline = order.read_text().strip(), time.monotonic() + 5
        while entry not in other_waiters(data_dir) and time.monotonic() < deadline:
            time.sleep(0.005)
        if entry not in other_waiters(data_dir):
            print(f"no waiter {entry}", flush=True)
            continue
        release_file_lock(handle)
        deadline = time.monotonic() + 30
        while entry in other_waiters(data_dir) and time.monotonic() < deadline:
            time.sleep(0.005)
        handle = acquire_file_lock(data_dir, 60, run_id="holder")
        print("retaken", flush=True)
    """
)

PASS_ENDS = ("retaken", "no waiter")  # the lines LOCK_HOLDER ends a pass with


# Holds the chDB data directory with a raw chDB session, outside atlas-dagster's lock.
RAW_CHDB_HOLDER = textwrap.dedent(
    """
    import sys, time
    import chdb.session
    session = chdb.session.Session(sys.argv[1])
    session.query("SELECT 1")
    print("held", flush=True)
    time.sleep(600)
    """
)


# How long an exited child's last lines may take to be read from its pipe (the reader ends at
# the pipe's end of file): a bound against a hang, not a measure of speed.
DRAIN_SECONDS = 30.0


class Lines:
    """A WaitLog that keeps what it is told (a resource or a pool claim reports its waits to it)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str) -> None:
        self.lines.append(msg)

    warning = info

    def waits(self) -> list[str]:
        return [line for line in self.lines if line.startswith("waiting for")]

    def __str__(self) -> str:
        return "\n".join(self.lines)


@dataclass
class Process:
    """A child process whose combined output is collected line by line."""

    popen: subprocess.Popen
    lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.append(line.rstrip("\n"))

    def _drain(self) -> None:
        """Once the child has exited: every line it wrote is in `lines`."""
        self._reader.join(DRAIN_SECONDS)
        assert not self._reader.is_alive(), f"pid {self.pid}: its output never ended"

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if predicate(line):
                    return line
            if self.popen.poll() is not None:
                self._drain()  # it has exited: its last lines, then no more
                found = [line for line in self.lines if predicate(line)]
                if found:
                    return found[0]
                break
            time.sleep(0.05)
        raise AssertionError(f"pid {self.pid}: expected line not seen; output:\n{self.output}")

    def finish(self, timeout: float = 300.0) -> int:
        code = self.popen.wait(timeout=timeout)
        self._drain()
        return code

    def kill(self) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=30)
        self._drain()


def start(args: list[str], env: dict[str, str], cwd: Path | None = None) -> Process:
    popen = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=cwd,
    )
    return Process(popen)


def python(script: str, *args: str, env: dict[str, str] | None = None) -> Process:
    return start([sys.executable, "-c", script, *args], env or dict(os.environ))


def cli(*args: str, env: dict[str, str]) -> Process:
    return start([CLI, *args], env)


@dataclass
class FaultSite:
    """A fresh tenant, engine, Dagster instance and tenants file under one temp folder."""

    work: Path
    tenant: Tenant
    env: dict[str, str]

    @property
    def dsn(self) -> str:
        return self.env["ATLAS_CLICKHOUSE_DSN"]

    @property
    def data_dir(self) -> Path:
        return Path(self.dsn[len("chdb://") :])

    @property
    def home(self) -> Path:
        return Path(self.env["DAGSTER_HOME"])

    def load(self, day: dt.date, domain: str = "casino") -> Process:
        tenant = self.tenant
        return cli(
            "load",
            "--org",
            tenant.organization_id,
            "--brand",
            tenant.brand_id,
            "--domains",
            domain,
            "--start",
            day.isoformat(),
            "--end",
            day.isoformat(),
            env=self.env,
        )


def fault_site(
    work: Path,
    org: str,
    start: dt.date,
    end: dt.date,
    domains: tuple[str, ...] = ("casino",),
    s3: dict | None = None,
    source: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> FaultSite:
    entry = {
        "organization_id": org,
        "brand_id": "main",
        "source": source or f"file://{work / 'exports'}",
        "start_date": start.isoformat(),
        "end_date": end.isoformat(),
        "domains": list(domains),
    }
    if s3:
        entry["s3"] = s3
    tenants_file = write_tenants(work / "tenants.yaml", [entry])
    [tenant] = load_tenants(tenants_file)
    home = work / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    # A persistent instance (pools need one) with the project's default pool limit.
    (home / "dagster.yaml").write_text(
        "concurrency:\n  pools:\n    default_limit: 3\ntelemetry:\n  enabled: false\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATLAS_", "DAGSTER_"))}
    env |= {
        "DAGSTER_HOME": str(home),
        "ATLAS_TENANTS_FILE": str(tenants_file),
        "ATLAS_CLICKHOUSE_DSN": f"chdb://{work / 'clickhouse'}",
        **(extra_env or {}),
    }
    return FaultSite(work, tenant, env)


def wait_for_table_part(
    data_dir: Path,
    table: str,
    alive: Callable[[], bool],
    output: Callable[[], str],
    timeout: float = 120.0,
) -> None:
    """Until a part (or a part being written) of the embedded engine's table `atlas.<table>`
    shows on disk: an INSERT into it has begun writing. For a table with no part before.

    Another process's load holds the data directory, so the test cannot query the engine: it
    watches the table's folder (Atomic database: store/<uuid[:3]>/<uuid>/). `alive` says
    whether the loading process still runs, `output` what it said (for a failure)."""
    deadline = time.monotonic() + timeout
    metadata = data_dir / "metadata" / "atlas" / f"{table}.sql"
    while not metadata.exists():  # the load's own schema set-up may create the table
        assert alive() and time.monotonic() < deadline, output()
        time.sleep(0.005)
    uuid = metadata.read_text().split("'")[1]
    folder = data_dir / "store" / uuid[:3] / uuid

    def parts() -> list[Path]:
        found = folder.iterdir() if folder.is_dir() else ()
        return [p for p in found if p.is_dir() and p.name != "detached"]

    while not parts():
        assert alive() and time.monotonic() < deadline, output()
        time.sleep(0.005)
