"""Test and bench helpers of the crash tests: a tenant's bulk window, the stack killed for real
(every process of it, SIGKILL), and what backfill_log and the raw tables hold afterwards."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance, RunsFilter

from atlas_dagster.cli.dagster_dev import DagsterStack, free_port, stop_group
from atlas_dagster.core.tags import BACKFILL_ID_TAG
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import Tenant
from testkit.bulk_exports import ensure_bulk_day


def days_of(first: dt.date, last: dt.date) -> list[dt.date]:
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def write_window(tenant: Tenant, domains: list[str], days: list[dt.date], rows: int) -> None:
    for day in days:
        for domain in domains:
            ensure_bulk_day(tenant, domain, day, rows)


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            # The parent pid is the 2nd field after the command, which may hold spaces.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def process_tree(root: int) -> list[int]:
    """The root and all its descendants alive now."""
    children, found, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def kill_everything(roots: list[int]) -> list[int]:
    """SIGKILL to each root's process group and to every descendant (a run worker may sit in
    another group): nothing of the stack gets to clean up. Returns the pids killed."""
    pids = [pid for root in roots for pid in process_tree(root)]
    for root in roots:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(root, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < deadline, [p for p in pids if alive(p)]
        time.sleep(0.05)
    return pids


def alive(pid: int) -> bool:
    """The process exists and is no zombie."""
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def table_folder(data_dir: Path, table: str) -> Path:
    """The embedded engine's folder of `atlas.<table>` (Atomic database: by the table's uuid)."""
    uuid = (data_dir / "metadata" / "atlas" / f"{table}.sql").read_text().split("'")[1]
    return data_dir / "store" / uuid[:3] / uuid


def parts_in_writing(folders: list[Path]) -> set[Path]:
    """The parts being written in the folders now (tmp_insert_*)."""
    found: set[Path] = set()
    for folder in folders:
        with contextlib.suppress(FileNotFoundError):
            found |= {p for p in folder.iterdir() if p.name.startswith("tmp_insert")}
    return found


def wait_for_insert(
    folders: list[Path],
    timeout: float,
    explain: Callable[[], str],
    leftovers: Collection[Path] = (),
) -> None:
    """Until a part is being written in one of the folders (tmp_insert_*, other than the
    leftovers of a killed INSERT): an INSERT is in progress, its day logged 'running'. Polled
    from the file system: the loading process holds the engine, so the test cannot query it."""
    deadline = time.monotonic() + timeout
    while not parts_in_writing(folders) - set(leftovers):
        assert time.monotonic() < deadline, explain()
        time.sleep(0.002)


def materialized_count(instance: DagsterInstance, backfill_id: str) -> int:
    runs = instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
    return sum(
        len(instance.all_logs(r.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION))
        for r in runs
    )


def wait_until(what: Callable[[], bool], timeout: float, explain: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, explain()
        time.sleep(0.2)


def log_states(dsn: str, organization_id: str) -> dict[tuple[str, dt.date], dict]:
    """Each (domain, day) of the tenant as backfill_log holds it now (FINAL)."""
    clickhouse = ClickHouseResource(dsn=dsn, lock_wait_seconds=60)
    with clickhouse.session() as client:
        result = client.query(
            "SELECT domain, partition_date, status, attempt, run_id, rows_loaded "
            "FROM atlas.backfill_log FINAL WHERE organization_id = {org:String}",
            parameters={"org": organization_id},
        )
    return {
        (r[0], r[1]): dict(zip(result.column_names, r, strict=True)) for r in result.result_rows
    }


def raw_counts(
    dsn: str, organization_id: str, domains: list[str]
) -> dict[tuple[str, dt.date], int]:
    """Rows per (domain, day) in the raw tables, without FINAL: a day loaded twice shows twice."""
    clickhouse = ClickHouseResource(dsn=dsn, lock_wait_seconds=60)
    counts: dict[tuple[str, dt.date], int] = {}
    with clickhouse.session() as client:
        for domain in domains:
            result = client.query(
                f"SELECT event_date, count() FROM atlas.tbt_raw_events_{domain} "
                "WHERE organization_id = {org:String} GROUP BY event_date",
                parameters={"org": organization_id},
            )
            counts |= {(domain, day): int(n) for day, n in result.result_rows}
    return counts


class SeparateStack:
    """`dagster-webserver` and `dagster-daemon run` started apart, as a production host runs
    them, each in its own session."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.port = free_port()
        self.processes: list[subprocess.Popen] = []
        self.daemon: subprocess.Popen | None = None
        self.stack: DagsterStack | None = None

    def _start(self, name: str, *arguments: str) -> subprocess.Popen:
        command = [str(Path(sys.executable).parent / name), *arguments]
        with open(self.log_dir / f"{name}.log", "ab") as log:
            process = subprocess.Popen(
                [*command, "-m", "atlas_dagster.definitions"],
                cwd=self.env["ATLAS_HOME"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.append(process)
        return process

    def start(self) -> DagsterStack:
        webserver = self._start("dagster-webserver", "-h", "127.0.0.1", "-p", str(self.port))
        self.daemon = self._start("dagster-daemon", "run")
        stack = DagsterStack(
            f"http://127.0.0.1:{self.port}",
            Path(self.env["DAGSTER_HOME"]),
            self.env,
            self.log_dir / "dagster-daemon.log",
            webserver.pid,
        )
        wait_until(lambda: _answers(stack.url), 120, stack.log_tail)
        self.stack = stack
        return stack

    @property
    def roots(self) -> list[int]:
        return [p.pid for p in self.processes if p.poll() is None]

    def restart_daemon(self) -> int:
        """SIGKILL to the daemon process alone (not its group: what it started lives on), then
        a new daemon; returns the killed pid."""
        assert self.daemon is not None
        killed = self.daemon.pid
        os.kill(killed, signal.SIGKILL)
        self.daemon.wait(timeout=10)
        self.daemon = self._start("dagster-daemon", "run")
        return killed

    def stop(self) -> None:
        for process in self.processes:
            stop_group(process)


@contextlib.contextmanager
def webserver_and_daemon(env: dict[str, str], log_dir: Path) -> Iterator[SeparateStack]:
    """A SeparateStack started; stopped after (whatever daemon runs by then)."""
    separate = SeparateStack(env, log_dir)
    try:
        separate.start()
        yield separate
    finally:
        separate.stop()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def loads_by_run(
    instance: DagsterInstance, run_ids: list[str]
) -> tuple[dict[tuple[str, str], list[str]], set[tuple[str, str]]]:
    """(asset, partition) -> the runs whose materialization says they loaded it, and the ones a
    relaunch reported "resumed": completed by an earlier attempt that was killed before it
    reported the day (a run reports each day one behind); no load."""
    loads: dict[tuple[str, str], list[str]] = {}
    resumed: set[tuple[str, str]] = set()
    for run_id in run_ids:
        for entry in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION):
            materialization = entry.asset_materialization
            if materialization is None:
                continue
            key = (materialization.asset_key.to_user_string(), str(materialization.partition))
            if "resumed" in materialization.metadata:
                resumed.add(key)
            else:
                loads.setdefault(key, []).append(run_id)
    return loads, resumed


def run_worker_pid(instance: DagsterInstance, run_id: str) -> int | None:
    """The run worker's pid, from the run's own "Started process for run (pid: N)" event."""
    for entry in instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT):
        match = re.search(r"Started process for run \(pid: (\d+)\)", entry.message or "")
        if match:
            return int(match.group(1))
    return None
