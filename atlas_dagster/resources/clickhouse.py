"""ClickHouseResource: sessions on one DSN's engine; embedded, one process at a time holds it."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Iterator

from clickhouse_connect.driver.client import Client
from dagster import ConfigurableResource, DagsterInstance, InitResourceContext
from pydantic import PrivateAttr

from atlas_dagster.core.phases import PhaseTimer
from atlas_dagster.core.waits import WaitLog
from atlas_dagster.resources.connection import connect, dsn_password, embedded_path, is_embedded
from atlas_dagster.resources.day_exclusion import (
    day_exclusion,
    day_key,
    in_process_day_exclusion,
)
from atlas_dagster.resources.embedded_engine import (
    InflightBytes,
    KeptEngine,
    open_engine,
    release_file_lock,
)
from atlas_dagster.secrets import redact
from atlas_dagster.settings import EMBEDDED_INFLIGHT_MB, check_cluster

# Engines kept open by `ClickHouseResource.kept_open()`, per DSN, shared by the process's threads.
_KEPT: dict[str, tuple[KeptEngine, int]] = {}
_KEPT_GUARD = threading.Lock()
# The Parquet bytes of the process's embedded INSERTs in flight (`ClickHouseResource.insert_room`).
_INFLIGHT = InflightBytes()


class ClickHouseResource(ConfigurableResource):
    """One DSN: chdb:///abs/path (embedded, the default) or http(s)://user:pw@host:port.

    Configured where it is wired, from the settings: definitions.py (EnvVar per variable) and the
    CLI (cli/engine.py); it never reads the environment or the settings itself."""

    dsn: str
    # A cluster name ('': none): a day's read uses s3Cluster over it.
    cluster: str = ""
    # Parquet megabytes the process's embedded INSERTs may read at once.
    embedded_inflight_mb: int = EMBEDDED_INFLIGHT_MB.default
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
        limit = int(EMBEDDED_INFLIGHT_MB.check(self.embedded_inflight_mb)) * 1024 * 1024
        return _INFLIGHT.hold(nbytes, limit, what, self.lock_wait_seconds, self._log)

    def resolved_dsn(self) -> str:
        return self.dsn

    def is_embedded(self) -> bool:
        return is_embedded(self.resolved_dsn())

    def resolved_cluster(self) -> str | None:
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
