"""A day's export as a load read it, and what a later listing of the day says changed since.

A fingerprint is each data file's path below the tenant's folder, its size, its version (the S3
ETag, or the modification time in nanoseconds on a local disk) and its footer rows: all from the
listing and footers the load reads anyway. It is stored as text with the day's row in
backfill_log; a later listing (no footer, no data read) is compared with it file by file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# The first line of every stored fingerprint: '' in backfill_log means "not recorded" (a day
# loaded before fingerprints existed), this line alone a day recorded with no file.
FORMAT = "v1"
# Files named one by one in a reason; more are counted.
NAMED = 3


@dataclass(frozen=True)
class FileStamp:
    key: str  # the file's path below the tenant's folder: year=…/month=…/day=…/name
    size: int
    version: str  # S3 ETag, or mtime in ns
    rows: int | None = None  # footer rows, when footers were read

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]


def encode(stamps: Iterable[FileStamp]) -> str:
    """The stored text: FORMAT, then one tab-separated line per file in key order (keys hold
    no tab nor newline: layout.FILE_NAME_RE and the day folders' names)."""
    lines = [
        f"{s.key}\t{s.size}\t{s.version}\t{'' if s.rows is None else s.rows}"
        for s in sorted(stamps, key=lambda s: s.key)
    ]
    return "\n".join([FORMAT, *lines])


def decode(text: str) -> tuple[FileStamp, ...] | None:
    """The stamps of a stored fingerprint; None when none was recorded."""
    if not text.startswith(FORMAT):
        return None
    stamps = []
    for line in text.split("\n")[1:]:
        key, size, version, rows = line.split("\t")
        stamps.append(FileStamp(key, int(size), version, int(rows) if rows else None))
    return tuple(stamps)


def changes(stored: tuple[FileStamp, ...], listed: tuple[FileStamp, ...]) -> str | None:
    """Why the listed files are not the ones loaded ("part-00001.parquet replaced; 2 files
    added"), or None when every file is there, unchanged, and no other."""
    before = {s.key: s for s in stored}
    now = {s.key: s for s in listed}
    replaced = [
        now[k].name
        for k in sorted(before.keys() & now.keys())
        if (before[k].size, before[k].version) != (now[k].size, now[k].version)
    ]
    added = [now[k].name for k in sorted(now.keys() - before.keys())]
    removed = [before[k].name for k in sorted(before.keys() - now.keys())]
    parts = [
        _named(names, verb)
        for names, verb in ((replaced, "replaced"), (added, "added"), (removed, "removed"))
        if names
    ]
    return "; ".join(parts) or None


def _named(names: list[str], verb: str) -> str:
    """ "part-1.parquet replaced", or "2 files added: part-3.parquet, part-4.parquet"."""
    if len(names) == 1:
        return f"{names[0]} {verb}"
    shown = ", ".join(names[:NAMED]) + (", …" if len(names) > NAMED else "")
    return f"{len(names)} files {verb}: {shown}"
