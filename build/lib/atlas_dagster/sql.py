"""Loads the project's .sql files and fills their validated identifier placeholders."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from string import Template

from atlas_dagster.settings import PROJECT_ROOT

SQL_DIR = PROJECT_ROOT / "sql"


@cache
def _read(relative: str) -> str:
    return (SQL_DIR / relative).read_text()


def query(name: str, **identifiers: str) -> str:
    """A query from sql/queries/; identifiers must already be validated by the caller."""
    return Template(_read(f"queries/{name}.sql")).substitute(identifiers)


def schema_files() -> list[Path]:
    return sorted((SQL_DIR / "schema").glob("*.sql"))


@cache
def schema_digest() -> str:
    """A digest of every schema file, recorded in atlas.schema_version when they are applied."""
    digest = hashlib.sha256()
    for path in schema_files():
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def statements(path: Path) -> list[str]:
    """Splits a DDL file into statements (the schema files hold no ';' inside literals)."""
    return [s.strip() for s in path.read_text().split(";\n") if _has_code(s)]


def _has_code(chunk: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in chunk.splitlines())
