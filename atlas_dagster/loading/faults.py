"""The one classification of a load's failures as transient (retried) or permanent (final).

Read from the error itself: our own exception types first (a contract violation, a mismatch, a
cancel or a wait that reached its bound is final whatever caused it), then every exception of
its chain (`__cause__`/`__context__`): a ClickHouse error's name or code, an S3 error code or
HTTP status (botocore's, or inside ClickHouse's S3_ERROR text), a connection error. Anything not
recognised as transient is permanent: a retry is only spent where it can help, and an unknown
failure still reaches the operator at once. docs/loading.md holds the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from atlas_dagster.core.waits import ClaimCanceled, PoolLimitError, WaitTimeout
from atlas_dagster.loading.errors import LoadCanceled, LoadMismatchError
from atlas_dagster.resources.embedded_engine import EngineOpenError
from atlas_dagster.scope import PartitionOutOfScope
from atlas_dagster.settings import SettingsError
from atlas_dagster.tenants import TenantConfigError
from atlas_dagster.validation.schema import ValidationError

# Final whatever their cause: the export breaks the contract (RowContractError is one), rows
# are missing after the INSERT, the run was canceled, a bounded wait already waited its hours,
# the configuration is wrong.
PERMANENT_TYPES: tuple[type[BaseException], ...] = (
    ValidationError,
    LoadMismatchError,
    LoadCanceled,
    ClaimCanceled,
    PartitionOutOfScope,
    WaitTimeout,
    EngineOpenError,
    PoolLimitError,
    SettingsError,
    TenantConfigError,
    KeyboardInterrupt,
    SystemExit,
)

# ClickHouse errors the service recovers from by itself (name, as ClickHouse ends its message
# with it, and code, for messages that carry only the code).
TRANSIENT_CLICKHOUSE = {
    "TIMEOUT_EXCEEDED": 159,
    "TOO_MANY_SIMULTANEOUS_QUERIES": 202,
    "NO_FREE_CONNECTION": 203,
    "SOCKET_TIMEOUT": 209,
    "NETWORK_ERROR": 210,
    "MEMORY_LIMIT_EXCEEDED": 241,
    "TABLE_IS_READ_ONLY": 242,
    "TOO_MANY_PARTS": 252,
    "ALL_CONNECTION_TRIES_FAILED": 279,
    "UNKNOWN_STATUS_OF_INSERT": 319,
    "KEEPER_EXCEPTION": 999,
    "POCO_EXCEPTION": 1000,
}
# ClickHouse errors about a remote object store: transient or not by the S3 answer they carry.
S3_CLICKHOUSE = {"S3_ERROR": 499, "RECEIVED_ERROR_FROM_REMOTE_IO_SERVER": 86}

# S3 error codes (botocore's Error.Code, or quoted in ClickHouse's S3_ERROR text).
TRANSIENT_S3_CODES = frozenset(
    {
        "SlowDown",
        "ServiceUnavailable",
        "InternalError",
        "RequestTimeout",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "OperationAborted",
    }
)
PERMANENT_S3_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "NoSuchKey",
        "NoSuchBucket",
        "InvalidBucketName",
        "AllAccessDisabled",
        "ExpiredToken",
        "InvalidToken",
    }
)
TRANSIENT_HTTP = frozenset({500, 502, 503, 504})

_CODE_RE = re.compile(r"\bCode: (\d+)\b")
_NAME_RE = re.compile(r"\(([A-Z][A-Z0-9_]+)\)\s*(?:\(version [^)]*\))?\s*$")
_HTTP_RE = re.compile(
    r"(?:HTTP status(?: code)?:?|HTTP/1\.[01]|status code:?|response code:?)\s*(\d{3})"
)
# Connection failures as they appear in a message (ClickHouse's Poco errors, the driver's).
_CONNECTION_WORDS = (
    "connection reset",
    "connection refused",
    "connection aborted",
    "broken pipe",
    "timed out",
    "timeout",
    "connection was closed",
    "remotedisconnected",
    "incompleteread",
    "unexpected eof",
)
_CONNECTION_TYPES: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError)


@dataclass(frozen=True)
class Fault:
    """A failure's class and its cause in a few words (for the run log and the retry line)."""

    transient: bool
    cause: str
    # The connection dropped while a server may still run the statement (see retry.py).
    uncertain: bool = False


def classify(exc: BaseException) -> Fault:
    """Transient or permanent, from the exception and its chain."""
    for link in _chain(exc):
        if isinstance(link, PERMANENT_TYPES):
            return Fault(False, f"{type(link).__name__} (never retried)")
    permanent: Fault | None = None
    for link in _chain(exc):
        fault = _one(link)
        if fault is None:
            continue
        if fault.transient:
            return fault
        permanent = permanent or fault
    return permanent or Fault(False, f"{type(exc).__name__} (not a known transient fault)")


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and all(link is not s for s in seen) and len(seen) < 20:
        seen.append(link)
        link = link.__cause__ or link.__context__
    return seen


def _one(exc: BaseException) -> Fault | None:
    """What one exception of the chain says by itself, or None."""
    botocore = _botocore(exc)
    if botocore is not None:
        return botocore
    if isinstance(exc, _CONNECTION_TYPES):
        return Fault(True, f"connection: {type(exc).__name__}", uncertain=True)
    text = str(exc)
    code = getattr(exc, "code", None)  # clickhouse-connect's errors carry the server's code
    if isinstance(code, int) and code > 0 and "Code: " not in text:
        text = f"Code: {code}. {text}"
    return _from_text(type(exc).__name__, text)


def _botocore(exc: BaseException) -> Fault | None:
    try:
        from botocore import exceptions as boto
    except ImportError:  # pragma: no cover - boto3 ships with dagster-aws
        return None
    if isinstance(exc, boto.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        what = f"S3 {status or '?'} {code}".strip()
        if code in TRANSIENT_S3_CODES or status in TRANSIENT_HTTP:
            return Fault(True, what)
        return Fault(False, what)
    if isinstance(
        exc,
        boto.EndpointConnectionError
        | boto.ConnectionClosedError
        | boto.ReadTimeoutError
        | boto.ConnectTimeoutError
        | boto.ResponseStreamingError,
    ):
        return Fault(True, f"S3 connection: {type(exc).__name__}")
    return None


def _from_text(kind: str, text: str) -> Fault | None:
    """A ClickHouse error (by its trailing name, else its code), an S3 answer quoted in it, or a
    connection failure in words."""
    first = text.split("Stack trace", 1)[0]
    name = _clickhouse_name(first)
    if name in TRANSIENT_CLICKHOUSE:
        return Fault(True, f"ClickHouse {name} ({TRANSIENT_CLICKHOUSE[name]})")
    if name in S3_CLICKHOUSE:
        return _s3_in_text(first, f"ClickHouse {name}")
    if name is not None:
        return Fault(False, f"ClickHouse {name}")
    s3 = _s3_in_text(first, kind, only_if_found=True)
    if s3 is not None:
        return s3
    word = _connection_word(first)
    if word is not None:
        return Fault(True, f"{word} ({kind})", uncertain=True)
    return None


def _connection_word(text: str) -> str | None:
    lowered = text.lower()
    return next((word for word in _CONNECTION_WORDS if word in lowered), None)


def _clickhouse_name(text: str) -> str | None:
    found = _NAME_RE.search(text.strip())
    if found:
        return found.group(1)
    code = _CODE_RE.search(text)
    if code is None:
        return None
    number = int(code.group(1))
    for table in (TRANSIENT_CLICKHOUSE, S3_CLICKHOUSE):
        for name, value in table.items():
            if value == number:
                return name
    return f"code {number}"


def _s3_in_text(text: str, what: str, only_if_found: bool = False) -> Fault | None:
    for code in PERMANENT_S3_CODES:
        if code in text:
            return Fault(False, f"{what}: {code}")
    for code in TRANSIENT_S3_CODES:
        if code in text:
            return Fault(True, f"{what}: {code}")
    status = _HTTP_RE.search(text)
    if status is not None:
        number = int(status.group(1))
        return Fault(number in TRANSIENT_HTTP, f"{what}: HTTP {number}")
    word = _connection_word(text)
    if word is not None:
        return Fault(True, f"{what}: {word}")
    return None if only_if_found else Fault(False, what)
