"""Reads the package's .sql files (package data) and fills their validated identifier placeholders.

The files live in the checkout's top-level sql/ and ship inside the package as
atlas_dagster.sql_files (pyproject.toml maps the folder): nothing here depends on a checkout.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from string import Template

SQL_PACKAGE = "atlas_dagster.sql_files"


def _node(relative: str) -> Traversable:
    return files(SQL_PACKAGE).joinpath(*relative.split("/"))


@cache
def text(relative: str) -> str:
    """A file's text by its path under sql/, e.g. "queries/count_day.sql"."""
    node = _node(relative)
    if not node.is_file():
        raise FileNotFoundError(f"no SQL file {relative!r} in the package {SQL_PACKAGE}")
    return node.read_text(encoding="utf-8")


def query(name: str, **identifiers: str) -> str:
    """A query from sql/queries/; identifiers must already be validated by the caller."""
    return Template(text(f"queries/{name}.sql")).substitute(identifiers)


def folder(relative: str) -> list[str]:
    """The .sql files of one folder under sql/ (not its subfolders), as paths, in name order."""
    names = sorted(n.name for n in _node(relative).iterdir() if n.name.endswith(".sql"))
    return [f"{relative}/{name}" for name in names]


def schema_files() -> list[str]:
    """sql/schema/*.sql in the order they are applied."""
    return folder("schema")


@cache
def schema_digest() -> str:
    """A digest of every schema file, recorded in atlas.schema_version when they are applied."""
    digest = hashlib.sha256()
    for path in schema_files():
        digest.update(path.rsplit("/", 1)[1].encode() + b"\0" + text(path).encode())
    return digest.hexdigest()


def statements(relative: str) -> list[str]:
    """Splits a DDL file into statements (the schema files hold no ';' inside literals)."""
    return [s.strip() for s in text(relative).split(";\n") if _has_code(s)]


def _has_code(chunk: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in chunk.splitlines())
