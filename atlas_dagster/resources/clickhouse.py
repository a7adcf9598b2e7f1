"""ClickHouse access through clickhouse-connect, embedded (chDB) or a server, with the chDB lock."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import clickhouse_connect
from clickhouse_connect.driver.client import Client
from dagster import ConfigurableResource

from atlas_dagster import sql
from atlas_dagster.loading.phases import PhaseTimer
from atlas_dagster.resources.embedded_engine import (
    KeptEngine,
    acquire_file_lock,
    release_file_lock,
)
from atlas_dagster.secrets import redact
from atlas_dagster.settings import clickhouse_cluster, clickhouse_dsn


def is_embedded(dsn: str) -> bool:
    return dsn.startswith("chdb://")


def embedded_path(dsn: str) -> Path:
    return Path(urlparse(dsn).path)


def dsn_password(dsn: str) -> str | None:
    return urlparse(dsn).password


# Engines kept open by `ClickHouseResource.kept_open()`, per DSN, shared by the process's threads.
_KEPT: dict[str, tuple[KeptEngine, int]] = {}
_KEPT_GUARD = threading.Lock()


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
        kept = _KEPT.get(dsn)
        if kept is not None:
            with kept[0].unit(timer.phase) as client:
                yield client
            return
        handle = None
        if is_embedded(dsn):
            with timer.phase("engine_lock_wait"):
                handle = acquire_file_lock(embedded_path(dsn), self.lock_wait_seconds)
        try:
            with timer.phase("engine_open"):
                client = clickhouse_connect.get_client(dsn=dsn)
            try:
                yield client
            finally:
                with timer.phase("engine_close"):
                    client.close()
        finally:
            if handle is not None:
                release_file_lock(handle)

    @contextlib.contextmanager
    def kept_open(self) -> Iterator[None]:
        """Within this scope the process keeps the embedded engine open between sessions, and
        hands it to any other process waiting at the end of the current session (see
        embedded_engine.py). A no-op against a server."""
        dsn = self.resolved_dsn()
        if not is_embedded(dsn):
            yield
            return
        with _KEPT_GUARD:
            engine, users = _KEPT.get(dsn) or (
                KeptEngine(
                    embedded_path(dsn),
                    lambda: clickhouse_connect.get_client(dsn=dsn),
                    self.lock_wait_seconds,
                ),
                0,
            )
            _KEPT[dsn] = (engine, users + 1)
        try:
            yield
        finally:
            with _KEPT_GUARD:
                engine, users = _KEPT[dsn]
                if users > 1:
                    _KEPT[dsn] = (engine, users - 1)
                else:
                    del _KEPT[dsn]
                    engine.shut()


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


# Sessions (a kept engine's lasts many units of work) already checked: the files cannot change
# under a running process.
_SCHEMA_CHECKED: weakref.WeakSet[Client] = weakref.WeakSet()


def ensure_schema(client: Client) -> None:
    """Applies the DDL when the database is new or the schema files changed since last time."""
    if client in _SCHEMA_CHECKED:
        return
    if not schema_is_current(client):
        apply_schema(client)
    _SCHEMA_CHECKED.add(client)


def query_rows(client: Client, text: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
    result = client.query(text, parameters=parameters)
    return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]
