"""Opens a client for a DSN and runs bound statements on it: bound values never go in a URL."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import clickhouse_connect
from clickhouse_connect.driver._backend.httpcommon import parse_command_body
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.httpclient import HttpClient

from atlas_dagster.resources.embedded_engine import EngineOpenError
from atlas_dagster.secrets import redact

_OS_ERROR_RE = re.compile(r"\[Errno -?\d+\] [^'\")]+")


def is_embedded(dsn: str) -> bool:
    return dsn.startswith("chdb://")


def embedded_path(dsn: str) -> Path:
    return Path(urlparse(dsn).path)


def dsn_password(dsn: str) -> str | None:
    return urlparse(dsn).password


def connect(dsn: str) -> Client:
    """A client for the DSN. Against a server, query() and raw_query() send bound parameters (a
    tenant's S3 keys among them) in the request body; statements go through run_command()."""
    if is_embedded(dsn):
        return clickhouse_connect.get_client(dsn=dsn)
    try:
        return clickhouse_connect.get_client(dsn=dsn, form_encode_query_params=True)
    except Exception as exc:
        raise EngineOpenError(
            f"ClickHouse at {redact(dsn)} is unreachable: {_short_reason(exc, dsn)}"
        ) from exc


def _short_reason(exc: Exception, dsn: str) -> str:
    """The OS error of a failed connection, else the first line of the server's answer."""
    text = redact(str(exc), (dsn_password(dsn),))
    found = _OS_ERROR_RE.search(text)
    return found.group(0).strip() if found else text.splitlines()[0][:300] if text else repr(exc)


def run_command(
    client: Client,
    text: str,
    parameters: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
) -> Any:
    """client.command(text, parameters, settings) with the parameters in the request body.

    Bound values must not travel in the URL: proxies and access logs keep it (a tenant's S3
    keys are bound parameters), and a long value (a list of tenants, a file glob) can exceed
    the server's URL limit. clickhouse-connect 1.12 honours form_encode_query_params in query()
    and raw_query() but not in command(), which always puts bound parameters in the URL
    (plan_command_request in driver/_backend/httpcommon.py): against a server a statement with
    parameters therefore goes through raw_query(), whose body is form-encoded, and its answer is
    read as command() reads it (one value, a list of values, or '' when the statement returns
    nothing). The embedded engine has no URL: its command() is used as it is.
    """
    if not parameters or not isinstance(client, HttpClient):
        return client.command(text, parameters=parameters, settings=settings)
    body = client.raw_query(text, parameters, settings)
    return parse_command_body(body) if body else ""


def query_rows(client: Client, text: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
    result = client.query(text, parameters=parameters)
    return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]
