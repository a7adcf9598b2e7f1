"""Brings a database to sql/schema/*.sql: idempotent DDL, reapplied when its digest changes."""

from __future__ import annotations

import weakref

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.resources.connection import run_command


def apply_schema(client: Client) -> int:
    """Applies sql/schema/*.sql in order (every statement is idempotent) and records the digest."""
    applied = 0
    for path in sql.schema_files():
        for statement in sql.statements(path):
            client.command(statement)
            applied += 1
    run_command(client, sql.query("record_schema_digest"), {"digest": sql.schema_digest()})
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
