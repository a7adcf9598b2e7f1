"""ClickHouse access through clickhouse-connect, embedded (chDB) or a server, with the chDB lock."""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import clickhouse_connect
from clickhouse_connect.driver._backend.httpcommon import parse_command_body
from clickhouse_connect.driver.client import Client
from dagster import ConfigurableResource, DagsterInstance, InitResourceContext
from pydantic import PrivateAttr

from atlas_dagster import sql
from atlas_dagster.core.phases import PhaseTimer
from atlas_dagster.core.waits import WaitLog
from atlas_dagster.resources.day_exclusion import (
    day_exclusion,
    day_key,
    in_process_day_exclusion,
)
from atlas_dagster.resources.embedded_engine import (
    EngineOpenError,
    InflightBytes,
    KeptEngine,
    open_engine,
    release_file_lock,
)
from atlas_dagster.secrets import redact
from atlas_dagster.settings import EMBEDDED_INFLIGHT_MB, check_cluster, current_settings


def is_embedded(dsn: str) -> bool:
    return dsn.startswith("chdb://")


def embedded_path(dsn: str) -> Path:
    return Path(urlparse(dsn).path)


def dsn_password(dsn: str) -> str | None:
    return urlparse(dsn).password


_OS_ERROR_RE = re.compile(r"\[Errno -?\d+\] [^'\")]+")


def connect(dsn: str) -> Client:
    """A client for the DSN. Against a server, bound parameters (a tenant's S3 keys among them)
    travel in the request body, never in the URL that proxies and access logs keep."""
    if is_embedded(dsn):
        return clickhouse_connect.get_client(dsn=dsn)
    try:
        client = clickhouse_connect.get_client(dsn=dsn, form_encode_query_params=True)
    except Exception as exc:
        raise EngineOpenError(
            f"ClickHouse at {redact(dsn)} is unreachable: {_short_reason(exc, dsn)}"
        ) from exc
    return _commands_bind_in_body(client)


def _commands_bind_in_body(client: Client) -> Client:
    """clickhouse-connect 1.12 honours form_encode_query_params in query() and raw_query() but
    not in command(), which always puts bound parameters in the URL (plan_command_request in
    driver/_backend/httpcommon.py): this client's command() with parameters goes through
    raw_query() instead, so they travel in the form-encoded body, and returns what command()
    would (one value, a list of values, or '' when the statement returns nothing)."""
    plain_command = client.command

    def command(
        cmd: str,
        parameters: Any = None,
        data: Any = None,
        settings: dict | None = None,
        use_database: bool = True,
        external_data: Any = None,
        transport_settings: dict[str, str] | None = None,
    ) -> Any:
        if not parameters or data is not None or external_data is not None:
            return plain_command(
                cmd, parameters, data, settings, use_database, external_data, transport_settings
            )
        body = client.raw_query(
            cmd,
            parameters,
            settings,
            use_database=use_database,
            transport_settings=transport_settings,
        )
        return parse_command_body(body) if body else ""

    client.command = command  # type: ignore[method-assign]
    return client


def _short_reason(exc: Exception, dsn: str) -> str:
    """The OS error of a failed connection, else the first line of the server's answer."""
    text = redact(str(exc), (dsn_password(dsn),))
    found = _OS_ERROR_RE.search(text)
    return found.group(0).strip() if found else text.splitlines()[0][:300] if text else repr(exc)


# Engines kept open by `ClickHouseResource.kept_open()`, per DSN, shared by the process's threads.
_KEPT: dict[str, tuple[KeptEngine, int]] = {}
_KEPT_GUARD = threading.Lock()
# The Parquet bytes of the process's embedded INSERTs in flight (`ClickHouseResource.insert_room`).
_INFLIGHT = InflightBytes()


class ClickHouseResource(ConfigurableResource):
    """One DSN: chdb:///abs/path (embedded, the default) or http(s)://user:pw@host:port.

    definitions.py configures every field from the code location's settings; a resource built
    without one (the CLI, tests) takes the process's settings (settings.current_settings)."""

    dsn: str = ""
    # A cluster name ('': none); None: the process's ATLAS_CLICKHOUSE_CLUSTER.
    cluster: str | None = None
    # Parquet megabytes the process's embedded INSERTs may read at once; 0: the process's
    # ATLAS_EMBEDDED_INFLIGHT_MB.
    embedded_inflight_mb: int = 0
    lock_wait_seconds: float = 3600.0
    # Set per run by Dagster (setup_for_execution): where waits are reported, who is waiting.
    _log: WaitLog | None = PrivateAttr(default=None)
    _run_id: str = PrivateAttr(default="")
    _instance: DagsterInstance | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._log = context.log
        self._run_id = context.run.run_id if context.run is not None else ""
        self._instance = context.instance

    def day_exclusion(
        self, tenant_key: str, domain: str, day: dt.date
    ) -> contextlib.AbstractContextManager[None]:
        """One load of a tenant-day-domain at a time (clear → INSERT → count). Against a server it
        is held in the Dagster instance's storage (resources/day_exclusion.py); embedded, the
        engine's file lock keeps other processes out and an in-process lock this one's threads."""
        if self.is_embedded():
            return in_process_day_exclusion(
                day_key(tenant_key, domain, day), self.lock_wait_seconds, self._log
            )
        return day_exclusion(
            self._instance,
            day_key(tenant_key, domain, day),
            self.lock_wait_seconds,
            self._log,
            self._run_id,
        )

    def insert_room(self, nbytes: int, what: str) -> contextlib.AbstractContextManager[None]:
        """Embedded: waits until the INSERTs in flight in this process leave room for `nbytes` of
        Parquet (embedded_inflight_mb; a larger day runs alone). A server's memory is its own
        business: nothing to wait for."""
        if not self.is_embedded():
            return contextlib.nullcontext()
        megabytes = self.embedded_inflight_mb or current_settings().embedded_inflight_mb
        limit = int(EMBEDDED_INFLIGHT_MB.check(megabytes)) * 1024 * 1024
        return _INFLIGHT.hold(nbytes, limit, what, self.lock_wait_seconds, self._log)

    def resolved_dsn(self) -> str:
        return self.dsn or current_settings().clickhouse_dsn

    def is_embedded(self) -> bool:
        return is_embedded(self.resolved_dsn())

    def resolved_cluster(self) -> str | None:
        if self.cluster is None:
            return current_settings().clickhouse_cluster
        return check_cluster(self.cluster) if self.cluster else None

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
            client, handle = open_engine(
                embedded_path(dsn),
                lambda: connect(dsn),
                self.lock_wait_seconds,
                timer.phase,
                self._log,
                self._run_id,
            )
        else:
            with timer.phase("engine_open"):
                client = connect(dsn)
        try:
            yield client
        finally:
            try:
                with timer.phase("engine_close"):
                    client.close()
            finally:
                if handle is not None:
                    release_file_lock(handle)

    @contextlib.contextmanager
    def kept_open(self) -> Iterator[None]:
        """Within this scope the process keeps the embedded engine open between sessions (its
        threads' sessions run side by side, one connection each) and hands it to any other
        process waiting once the sessions in flight end (see embedded_engine.py). A no-op
        against a server."""
        dsn = self.resolved_dsn()
        if not is_embedded(dsn):
            yield
            return
        with _KEPT_GUARD:
            engine, users = _KEPT.get(dsn) or (
                KeptEngine(
                    embedded_path(dsn),
                    lambda: connect(dsn),
                    self.lock_wait_seconds,
                    self._log,
                    self._run_id,
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
