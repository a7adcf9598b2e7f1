"""ClickHouse access through clickhouse-connect, embedded (chDB) or a server, with the chDB lock."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import clickhouse_connect
from clickhouse_connect.driver.client import Client
from dagster import ConfigurableResource

from atlas_dagster import sql
from atlas_dagster.loading.phases import PhaseTimer
from atlas_dagster.secrets import redact
from atlas_dagster.settings import clickhouse_cluster, clickhouse_dsn

log = logging.getLogger("atlas_dagster.clickhouse")


class EngineBusyError(TimeoutError):
    """Another process held the embedded engine for longer than the bounded wait."""


def is_embedded(dsn: str) -> bool:
    return dsn.startswith("chdb://")


def embedded_path(dsn: str) -> Path:
    return Path(urlparse(dsn).path)


def dsn_password(dsn: str) -> str | None:
    return urlparse(dsn).password


@contextlib.contextmanager
def _engine_lock(data_dir: Path, wait_seconds: float) -> Iterator[None]:
    """chDB lets one process hold a data directory: queue behind an flock, bounded and logged."""
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    lock_path = data_dir.parent / f"{data_dir.name}.lock"
    with open(lock_path, "a+") as handle:
        deadline = time.monotonic() + wait_seconds
        waited_since: float | None = None
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if waited_since is None:
                    waited_since = time.monotonic()
                    log.info("embedded ClickHouse at %s is busy; waiting for it", data_dir)
                if time.monotonic() > deadline:
                    raise EngineBusyError(
                        f"embedded ClickHouse at {data_dir} stayed busy for {wait_seconds:.0f}s"
                    ) from None
                time.sleep(0.2)
        if waited_since is not None:
            log.info("embedded ClickHouse free after %.1fs", time.monotonic() - waited_since)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class ClickHouseResource(ConfigurableResource):
    """One DSN: chdb:///abs/path (embedded, the default) or http(s)://user:pw@host:port."""

    dsn: str = ""
    cluster: str = ""
    lock_wait_seconds: float = 3600.0

    def resolved_dsn(self) -> str:
        return self.dsn or clickhouse_dsn()

    def is_embedded(self) -> bool:
        return is_embedded(self.resolved_dsn())

    def resolved_cluster(self) -> str | None:
        return self.cluster or clickhouse_cluster()

    def redact(self, text: str, extra: tuple[str | None, ...] = ()) -> str:
        return redact(text, (dsn_password(self.resolved_dsn()), *extra))

    @contextlib.contextmanager
    def session(self, timer: PhaseTimer | None = None) -> Iterator[Client]:
        """Holds the engine for one unit of work only; in embedded mode other processes wait.

        `timer` gets engine_lock_wait (embedded only), engine_open and engine_close.
        """
        timer = timer or PhaseTimer()
        dsn = self.resolved_dsn()
        with contextlib.ExitStack() as held:
            if is_embedded(dsn):
                with timer.phase("engine_lock_wait"):
                    held.enter_context(_engine_lock(embedded_path(dsn), self.lock_wait_seconds))
            with timer.phase("engine_open"):
                client = clickhouse_connect.get_client(dsn=dsn)
            try:
                yield client
            finally:
                with timer.phase("engine_close"):
                    client.close()


def apply_schema(client: Client) -> int:
    """Applies sql/schema/*.sql in order (every statement is idempotent) and records the digest."""
    applied = 0
    for path in sql.schema_files():
        for statement in sql.statements(path):
            client.command(statement)
            applied += 1
    client.command(sql.query("record_schema_digest"), parameters={"digest": sql.schema_digest()})
    return applied


def schema_is_current(client: Client) -> bool:
    if not int(client.command(sql.query("schema_version_exists"))):
        return False
    return client.command(sql.query("schema_digest")) == sql.schema_digest()


def ensure_schema(client: Client) -> None:
    """Applies the DDL when the database is new or the schema files changed since last time."""
    if not schema_is_current(client):
        apply_schema(client)


def query_rows(client: Client, text: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
    result = client.query(text, parameters=parameters)
    return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]
