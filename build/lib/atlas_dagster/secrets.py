"""Keeps secrets (DSN passwords, S3 keys) out of messages, logs and Dagster metadata."""

from __future__ import annotations

import re
from collections.abc import Iterable

_USERINFO_RE = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@\s]*)@")


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Replaces every known secret and any URL password in text with '***'."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _USERINFO_RE.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
