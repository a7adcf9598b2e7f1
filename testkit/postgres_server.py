"""A real PostgreSQL server (Debian's `postgresql` binaries) on loopback, for the Dagster instance.

initdb and postgres refuse to run as root: as root they run as the `postgres` OS user (runuser),
else as the current user. The cluster lives in a fresh temp dir with its unix socket there too,
listens on 127.0.0.1 only, on a free port, and checks a generated password (scram-sha-256).
Missing binaries fail the fixture with a message saying how to install them; it never skips.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from dagster import DagsterInstance

from atlas_dagster.cli.dagster_dev import DagsterStack, free_port, serve
from testkit.dagster_stack import DAGSTER_YAML, REPO, isolated_env, run_dagster_dev

LOOPBACK = "127.0.0.1"
READY_TIMEOUT_SECONDS = 60.0
DATABASE = "dagster"
USER = "atlas"
POSTGRES_STORAGE_YAML = REPO / "dagster.postgres.yaml"


@dataclass(frozen=True)
class PostgresServer:
    port: int
    password: str
    database: str = DATABASE
    user: str = USER
    host: str = LOOPBACK

    @property
    def env(self) -> dict[str, str]:
        """The variables dagster.postgres.yaml reads (the password never goes into a file)."""
        return {
            "ATLAS_DAGSTER_PG_HOST": self.host,
            "ATLAS_DAGSTER_PG_PORT": str(self.port),
            "ATLAS_DAGSTER_PG_USER": self.user,
            "ATLAS_DAGSTER_PG_PASSWORD": self.password,
            "ATLAS_DAGSTER_PG_DB": self.database,
        }


def postgres_bin_dir() -> Path:
    """The newest /usr/lib/postgresql/<version>/bin holding initdb and postgres."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
    )
    for candidate in reversed(candidates):
        if all(os.access(Path(candidate) / tool, os.X_OK) for tool in ("initdb", "postgres")):
            return Path(candidate)
    on_path = shutil.which("initdb")
    if on_path and shutil.which("postgres"):
        return Path(on_path).parent
    pytest.fail(
        "PostgreSQL binaries not found (initdb and postgres under /usr/lib/postgresql/*/bin or on "
        "PATH): install Debian's postgresql (`apt-get install postgresql`, as the project's "
        "system-deps script does); the production-instance tests need a real PostgreSQL",
        pytrace=False,
    )


def _as_server_user(command: list[str]) -> list[str]:
    """initdb/postgres refuse root: run them as the postgres OS user when we are root."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def _server_owned_dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="atlas-pg-"))
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")
    path.chmod(0o700)
    return path


def _wait_ready(bin_dir: Path, socket_dir: Path, port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while True:
        ready = subprocess.run(
            [str(bin_dir / "pg_isready"), "-h", str(socket_dir), "-p", str(port), "-q"],
            check=False,
        )
        if ready.returncode == 0:
            return
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"PostgreSQL did not come up on port {port} (exit {process.poll()})")
        time.sleep(0.2)


@contextlib.contextmanager
def postgres_server(durable: bool = False) -> Iterator[PostgresServer]:
    """A fresh cluster; `durable` keeps PostgreSQL's own fsync and synchronous commit (as a
    production server has them) for benchmarks, where tests turn both off."""
    bin_dir = postgres_bin_dir()
    root = _server_owned_dir()
    data, sockets = root / "data", root / "sockets"
    password = secrets.token_urlsafe(18)
    port = free_port()
    try:
        pwfile = root / "pwfile"
        pwfile.write_text(password + "\n")
        sockets.mkdir()
        if os.geteuid() == 0:
            for path in (pwfile, sockets):
                shutil.chown(path, "postgres", "postgres")
        pwfile.chmod(0o600)
        subprocess.run(
            _as_server_user(
                [
                    str(bin_dir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    USER,
                    f"--pwfile={pwfile}",
                    "--auth-local=scram-sha-256",
                    "--auth-host=scram-sha-256",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ]
            ),
            check=True,
            capture_output=True,
        )
        pwfile.unlink()
        server_log = open(root / "postgres.log", "wb")  # noqa: SIM115 - closed below
        process = subprocess.Popen(
            _as_server_user(
                [
                    str(bin_dir / "postgres"),
                    "-D",
                    str(data),
                    "-p",
                    str(port),
                    "-k",
                    str(sockets),
                    "-c",
                    f"listen_addresses={LOOPBACK}",
                    # Tests run a throwaway cluster without durability (not what they test);
                    # a benchmark keeps PostgreSQL's defaults, as production has them.
                    *([] if durable else ["-c", "fsync=off", "-c", "synchronous_commit=off"]),
                ]
            ),
            stdout=subprocess.DEVNULL,
            stderr=server_log,
            start_new_session=True,
        )
        try:
            _wait_ready(bin_dir, sockets, port, process)
            server = PostgresServer(port, password)
            _create_database(server)
            yield server
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
            server_log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _create_database(server: PostgresServer) -> None:
    import psycopg2

    connection = psycopg2.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        dbname="postgres",
    )
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{server.database}"')
    finally:
        connection.close()


def postgres_instance_yaml() -> str:
    """The project's dagster.yaml with the production storage block appended."""
    return DAGSTER_YAML.read_text() + "\n" + POSTGRES_STORAGE_YAML.read_text()


@contextlib.contextmanager
def dagster_dev_on_postgres(
    work: Path, tenants_file: Path, server: PostgresServer, extra_env: dict[str, str] | None = None
) -> Iterator[DagsterStack]:
    """`dagster dev` on an instance whose storage is this PostgreSQL (dagster.postgres.yaml)."""
    env = isolated_env(work, tenants_file, {**server.env, **(extra_env or {})})
    (Path(env["DAGSTER_HOME"]) / "dagster.yaml").write_text(postgres_instance_yaml())
    with serve(env, work / "dagster-dev.log") as stack:
        yield stack


@contextlib.contextmanager
def dagster_dev(
    work: Path,
    tenants_file: Path,
    storage: str,
    extra_env: dict[str, str] | None = None,
    durable: bool = False,
) -> Iterator[DagsterStack]:
    """`dagster dev` on a fresh instance stored in SQLite (the default) or a fresh PostgreSQL."""
    if storage == "sqlite":
        with run_dagster_dev(work, tenants_file, extra_env) as stack:
            yield stack
        return
    with (
        postgres_server(durable) as server,
        dagster_dev_on_postgres(work, tenants_file, server, extra_env) as stack,
    ):
        yield stack


@contextlib.contextmanager
def instance_at(home: Path, env: Mapping[str, str]) -> Iterator[DagsterInstance]:
    """The instance of this DAGSTER_HOME, opened in this process with env's ATLAS_DAGSTER_PG_*
    variables (a PostgreSQL instance reads its connection from them)."""
    names = [n for n in env if n.startswith("ATLAS_DAGSTER_PG_")]
    saved = {n: os.environ.get(n) for n in names}
    os.environ.update({n: env[n] for n in names})
    try:
        with DagsterInstance.from_config(str(home)) as instance:
            yield instance
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def stack_instance(stack: DagsterStack) -> Iterator[DagsterInstance]:
    """The stack's instance, opened in this process with the stack's environment."""
    with instance_at(stack.home, stack.env) as instance:
        yield instance
