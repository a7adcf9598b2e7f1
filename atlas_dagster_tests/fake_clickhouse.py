"""A loopback HTTP listener that answers like a ClickHouse server just enough for one day's
`insert_day` (there is no ClickHouse server on this machine), and records every request: its
request line (what proxies and access logs keep) and its body, plus when each statement ran."""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from atlas_dagster import sql
from atlas_dagster.domains import get_domain
from atlas_dagster.exports.layout import DayExport, ExportFile, day_folder
from atlas_dagster.loading.day_load import PreparedDay
from atlas_dagster.tenants import Tenant
from atlas_dagster.validation.schema import DaySchema


@dataclass
class Request:
    line: str
    body: str
    started: float
    finished: float = 0.0


# How long a held INSERT waits for its gate: a bound against a test that never opens it.
GATE_SECONDS = 120.0


@dataclass
class FakeClickHouse:
    port: int
    rows: int  # what count_day answers
    # When set, an INSERT into the inbound table is answered only once the test opens the gate:
    # a load held inside its day for as long as the test needs.
    insert_gate: threading.Event | None = None
    requests: list[Request] = field(default_factory=list)
    # For an INSERT whose connection dropped (loading/retry.py): whether system.processes still
    # lists it (until a KILL QUERY), and how system.query_log says it ended.
    still_running: bool = False
    query_outcome: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def statements(self, marker: str) -> list[Request]:
        return [r for r in self.requests if marker in r.body]


def _answer(body: str, fake: FakeClickHouse) -> bytes:
    """The answer of one statement, in TabSeparated (what command() and raw_query() read)."""
    if "version()" in body:
        return b"25.3.1.1\tUTC\n"
    if "FROM system.tables WHERE database = 'atlas' AND name = 'schema_version'" in body:
        return b"1\n"
    if "argMax(digest, applied_at)" in body:
        return sql.schema_digest().encode() + b"\n"
    if "SELECT max(attempt)" in body:
        return b"0\n"
    if "count() > 0 AS present" in body:
        return b"0\n"
    if re.search(r"INSERT INTO atlas\.\w+_events_inbound", body):
        if fake.insert_gate is not None:
            fake.insert_gate.wait(GATE_SECONDS)
        return b""
    if "SELECT count() AS events" in body:
        return f"{fake.rows}\n".encode()
    if "FROM system.processes" in body:
        return b"1\n" if fake.still_running else b"0\n"
    if "KILL QUERY" in body:
        fake.still_running = False
        return b""
    if "FROM system.query_log" in body:
        return f"{fake.query_outcome}\n".encode()
    return b""  # INSERTs into backfill_log, and the driver's settings probe (empty is fine)


@contextlib.contextmanager
def fake_clickhouse(
    rows: int, insert_gate: threading.Event | None = None
) -> Iterator[FakeClickHouse]:
    fake = FakeClickHouse(0, rows, insert_gate)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            started = time.monotonic()
            size = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(size).decode(errors="replace")
            request = Request(self.requestline, body, started)
            fake.requests.append(request)
            answer = _answer(body, fake)
            request.finished = time.monotonic()
            self.send_response(200)
            self.send_header("X-ClickHouse-Format", "TabSeparated")
            self.send_header("X-ClickHouse-Timezone", "UTC")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        do_GET = do_POST

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def prepared_day(tenant: Tenant, domain: str, day: dt.date, rows: int) -> PreparedDay:
    """A validated day as prepare_day would hand it over (one file of `rows` rows), for a
    target that never reads it."""
    folder = day_folder(tenant, domain, day)
    file = ExportFile(f"{folder}/part-0.parquet", "part-0.parquet", 1, rows, None)
    export = DayExport(folder, (file,))
    secrets = tenant.s3.credentials() or ()
    return PreparedDay(tenant, get_domain(domain), day, export, DaySchema(frozenset()), secrets)
