"""resources/connection.py against a server (the loopback stand-in of fake_clickhouse.py): a
statement's bound values, long or secret, travel in the request body, never in the URL, and its
answer reads as command() reads it; and no statement of the package binds through command()."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from clickhouse_connect.driver.client import Client

import atlas_dagster
from atlas_dagster.resources.connection import connect, run_command
from atlas_dagster_tests.fake_clickhouse import FakeClickHouse, fake_clickhouse

SECRET = "conn-test-secret-7f3a"
LONG = "tenant-" * 4000  # 28 KB: past the 16 KB a server or proxy takes in a request line


@pytest.fixture
def server() -> Iterator[FakeClickHouse]:
    with fake_clickhouse(rows=0) as fake:
        yield fake


@pytest.fixture
def client(server: FakeClickHouse) -> Iterator[Client]:
    client = connect(server.url.replace("http://", "http://default:dsn-pw@"))
    try:
        yield client
    finally:
        client.close()


def _bound(server: FakeClickHouse) -> list:
    return [r for r in server.requests if SECRET in r.body or SECRET in r.line]


def test_bound_values_travel_in_the_body(server: FakeClickHouse, client: Client) -> None:
    text = "SELECT max(attempt) FROM atlas.backfill_log WHERE a = {a:String} AND b = {b:String}"
    assert run_command(client, text, {"a": SECRET, "b": LONG}) == 0
    [request] = _bound(server)
    assert SECRET in request.body and LONG in request.body
    assert SECRET not in request.line and "tenant-tenant" not in request.line
    assert "param_" not in request.line, request.line


def test_answers_read_as_command_reads_them(server: FakeClickHouse, client: Client) -> None:
    one_row = "SELECT version(), timezone() WHERE {s:String} != ''"
    assert run_command(client, one_row, {"s": SECRET}) == ["25.3.1.1", "UTC"]
    nothing = "INSERT INTO atlas.backfill_log SELECT {s:String}"
    assert run_command(client, nothing, {"s": SECRET}) == ""
    settings = {"query_id": "atlas-test-1"}
    assert run_command(client, nothing, {"s": SECRET}, settings=settings) == ""
    assert len(_bound(server)) == 3
    assert all(SECRET not in r.line for r in server.requests)
    assert "query_id=atlas-test-1" in server.requests[-1].line  # settings stay in the URL


def test_command_itself_still_puts_them_in_the_url(server: FakeClickHouse, client: Client) -> None:
    """Why run_command exists (clickhouse-connect 1.12): when this fails, command() binds in the
    body by itself and run_command can become a plain client.command()."""
    client.command("SELECT 1 WHERE {s:String} != ''", parameters={"s": SECRET})
    [request] = _bound(server)
    assert SECRET in request.line


def test_no_statement_binds_through_command_itself() -> None:
    """The client's own command() would put the values in the URL: every call with parameters
    goes through run_command (the one in resources/connection.py aside)."""
    package = Path(atlas_dagster.__file__).parent
    offenders = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "command"
                and (len(node.args) > 1 or any(k.arg == "parameters" for k in node.keywords))
            ):
                offenders.append(f"{path.relative_to(package)}:{node.lineno}")
    assert [o for o in offenders if not o.startswith("resources/connection.py:")] == []
    assert len(offenders) == 1, offenders  # run_command's own, for the embedded engine
