"""A failed day's diagnosis from backfill_log in the client's words: where, what, what to change.

Only what the loader's messages say about the client's own export reaches a report: the file
(relative to the export's root), column, first bad row and value, and advice. A message this
module does not recognise is never shown as it is (it may name hosts, runs or paths of ours): the
client reads that the day failed on Atlas's side and is retried.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from atlas_dagster.domains import DOMAINS
from atlas_dagster.secrets import redact
from atlas_dagster.tenants import Tenant

# Values from the client's rows are shown, cut to this many characters.
VALUE_CHARS = 80
# Any URL with a host: endpoints and internal hosts never reach a report.
_URL_RE = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"]+", re.IGNORECASE)
_CLASS_RE = re.compile(r"^(?P<name>[A-Za-z]+Error|[A-Za-z]+Exception|LoadCanceled): (?P<text>.*)$")
_ROW_RE = re.compile(
    r"^(?P<file>\S+): column (?P<column>\w+) (?P<broken>.+?) in (?P<rows>\d+) row\(s\), "
    r"first at row (?P<row>\d+) \(0-based\) with value (?P<value>.*)$"
)
_MISSING_RE = re.compile(r"^(?P<file>\S+): missing column (?P<column>\w+) \(expected (?P<t>.+)\)$")
_TYPE_RE = re.compile(
    r"^(?P<file>\S+): column (?P<column>\w+) has type (?P<found>.+), expected (?P<t>.+)$"
)
_FOOTER_RE = re.compile(r"column (?P<column>\w+) \((?P<found>[^)]*)\) (?P<check>[^;]+)")
_NO_FILES_RE = re.compile(r"no Parquet files for the day at (?P<folder>\S+?)/?$")
_NAME_RE = re.compile(r"^(?P<file>\S+): file name has characters that are not allowed$")
_CORRUPT_RE = re.compile(r"^(?P<file>\S+): (corrupt or unreadable Parquet|cannot read Parquet)")
_MIXED_RE = re.compile(r"^(?P<folder>\S+): files disagree on the type of (?P<columns>.+?) \(")
_WHERE_RE = re.compile(
    r"^(?P<file>\S+): holds column (?P<column>\w+), which (?P<other>\S+) has only"
)
_TABLE_RE = re.compile(r"^(?P<folder>\S+)/ is (?P<what>an? [A-Za-z ]+ table) \((?P<log>\w+)/")
_INNER_RE = re.compile(r"^(?P<folder>\S+)/: a partition folder inside the day's folder")

ROW_ADVICE = {
    "is empty": "Every row needs a non-empty {column}.",
    "is null": "Every row needs a value in {column}; the export contract has no null there.",
    "names another tenant than the partition's": (
        "This folder holds rows of another organization or brand: export only rows whose "
        "{column} is {own}."
    ),
    "is outside the partition's UTC day": (
        "Put each event in the folder of its UTC day: event_timestamp, in UTC, must fall on "
        "the folder's day."
    ),
    "is not an event type of this domain": "Use only the {domain} event types: {event_types}.",
    "is negative": "Values of {column} must be zero or positive.",
    "is NaN or infinite": "Values of {column} must be finite numbers.",
    "does not fit Decimal(18, 4)": (
        "Values of {column} must be below 100,000,000,000,000 (at most 14 digits before the "
        "decimal point)."
    ),
}
FOOTER_ADVICE = {
    "holds null values": "Every row needs a value in {column}; the export contract has no null.",
    "holds another tenant's ids": ROW_ADVICE["names another tenant than the partition's"],
    "falls outside the partition's UTC day": ROW_ADVICE["is outside the partition's UTC day"],
}
# Columns whose values may name another tenant: never shown.
TENANT_COLUMNS = ("organization_id", "brand_id")
OUR_SIDE = (
    "The day could not be loaded because of a problem on Atlas's side; nothing needs to change in "
    "your export. It is retried."
)


@dataclass(frozen=True)
class ClientFailure:
    domain: str
    day: dt.date
    problem: str  # what is wrong, in one sentence
    advice: str  # what to change in the export
    file: str = ""  # relative to the export's root
    column: str = ""
    first_row: int | None = None  # 0-based within the file
    value: str | None = None
    rows: int | None = None  # rows breaking the rule in that file
    attempt: int = 1
    ours: bool = False  # a problem on Atlas's side, not the export's
    not_exported: bool = False  # no file for the day yet: to export, not to fix


class Scrubber:
    """Takes known secrets (the tenant's S3 keys as the environment holds them, its endpoint,
    and any the caller knows, e.g. the DSN's password), URL passwords and any URL that is not the
    tenant's own export out of a report's text; the export's own paths become relative."""

    def __init__(self, tenant: Tenant, known: tuple[str | None, ...] = ()) -> None:
        try:
            keys = tenant.s3.credentials() or (None, None)
        except ValueError:
            keys = (None, None)
        self._secrets = (*keys, tenant.s3.endpoint_url, *known)
        self._source = tenant.source + "/"

    def __call__(self, text: str) -> str:
        text = redact(text, self._secrets).replace(self._source, "\0")
        return _URL_RE.sub("[address removed]", text).replace("\0", "")


def relative(path: str, tenant: Tenant) -> str:
    """A file of the export, from the export's root (never the host or our mount point)."""
    source = tenant.source + "/"
    if path.startswith(source):
        return path[len(source) :]
    return path.rsplit("/", 1)[-1]


def _fill(template: str, column: str, domain: str, tenant: Tenant) -> str:
    own = tenant.organization_id if column == "organization_id" else tenant.brand_id
    event_types = ", ".join(DOMAINS[domain].event_types) if domain in DOMAINS else ""
    return template.format(column=column, domain=domain, own=repr(own), event_types=event_types)


def _row_failures(lines: list[str], base: dict, tenant: Tenant) -> list[ClientFailure]:
    failures = []
    for line in lines:
        found = _ROW_RE.match(line)
        if not found:
            continue
        column, broken = found["column"], found["broken"]
        value = None if column in TENANT_COLUMNS else found["value"].strip("'")[:VALUE_CHARS]
        advice = ROW_ADVICE.get(broken, "Fix {column} in the rows named.")
        failures.append(
            ClientFailure(
                **base,
                problem=f"Column {column} {broken}.",
                advice=_fill(advice, column, base["domain"], tenant),
                file=relative(found["file"], tenant),
                column=column,
                first_row=int(found["row"]),
                value=value,
                rows=int(found["rows"]),
            )
        )
    return failures


def _validation_failure(text: str, base: dict, tenant: Tenant) -> ClientFailure | None:
    domain = base["domain"]
    if found := _MISSING_RE.match(text):
        column = found["column"]
        return ClientFailure(
            **base,
            problem=f"Column {column} is missing.",
            advice=f"Add the column {column} as {found['t']}.",
            file=relative(found["file"], tenant),
            column=column,
        )
    if found := _TYPE_RE.match(text):
        column = found["column"]
        return ClientFailure(
            **base,
            problem=f"Column {column} has type {found['found']}.",
            advice=f"Write {column} as {found['t']}.",
            file=relative(found["file"], tenant),
            column=column,
        )
    if found := _WHERE_RE.match(text):
        column = found["column"]
        return ClientFailure(
            **base,
            problem=f"Some files of the day hold column {column}, others only in a folder name.",
            advice=f"Export every file of the day the same way: {column} in every file, or in "
            "none (partitioned by it).",
            file=relative(found["file"], tenant),
            column=column,
        )
    if found := _MIXED_RE.match(text):
        return ClientFailure(
            **base,
            problem=f"The day's files disagree on the type of {found['columns']}.",
            advice="Export every file of the day with one type for these columns.",
            column=found["columns"],
        )
    file, _, rest = text.partition(": ")
    if footer := _FOOTER_RE.search(rest):
        column, check = footer["column"], footer["check"].split(";")[0].strip()
        template = next((a for c, a in FOOTER_ADVICE.items() if check.startswith(c)), None)
        if template is None:
            return None
        shown = "" if column in TENANT_COLUMNS else f" ({footer['found'][:VALUE_CHARS]})"
        return ClientFailure(
            **base,
            problem=f"Column {column}{shown} {check.split(';')[0]}.",
            advice=_fill(template, column, domain, tenant),
            file=relative(file, tenant),
            column=column,
        )
    return None


def _export_failure(text: str, base: dict, tenant: Tenant) -> ClientFailure | None:
    if found := _NO_FILES_RE.search(text):
        folder = relative(found["folder"], tenant)
        return ClientFailure(
            **base,
            problem="No file was found for the day.",
            advice=f"Export the day's Parquet files to {folder}/.",
            file=folder + "/",
            not_exported=True,
        )
    if found := _NAME_RE.match(text):
        return ClientFailure(
            **base,
            problem="A file name has characters that are not allowed.",
            advice="Name files with letters, digits, '.', '_', '=' and '-' only, ending .parquet.",
            file=relative(found["file"], tenant),
        )
    if found := _CORRUPT_RE.match(text):
        return ClientFailure(
            **base,
            problem="A file is not a readable Parquet file.",
            advice="Export the file again (it may be truncated or not Parquet).",
            file=relative(found["file"], tenant),
        )
    if found := _TABLE_RE.match(text):
        return ClientFailure(
            **base,
            problem=f"The export is {found['what']} ({found['log']}/), not plain Parquet files: "
            "its folders also hold files of versions the table has removed.",
            advice="Export the table's current version as plain Parquet files in the layout "
            "(partitioned by organization_id, brand_id, year, month, day).",
            file=relative(found["folder"], tenant) + "/",
        )
    if found := _INNER_RE.match(text):
        return ClientFailure(
            **base,
            problem="The day's files are in a partition folder inside the day's folder.",
            advice="Write the day's files directly in its day= folder: partition by year, month "
            "and day last.",
            file=relative(found["folder"], tenant) + "/",
        )
    if text.startswith("cannot list "):
        return ClientFailure(
            **base,
            problem="The export location could not be read.",
            advice="Check that Atlas still has read access to your export location.",
        )
    return None


def diagnose(tenant: Tenant, row: dict) -> list[ClientFailure]:
    """The client's failures of one failed day (several when several files or columns break)."""
    base = {
        "domain": row["domain"],
        "day": row["partition_date"],
        "attempt": int(row.get("attempt") or 1),
    }
    message = str(row.get("error_message") or "")
    found = _CLASS_RE.match(message.split("\n", 1)[0])
    kind, first = (found["name"], found["text"]) if found else ("", message)
    lines = [first, *message.split("\n")[1:]]
    failures: list[ClientFailure] = []
    if kind == "RowContractError":
        failures = _row_failures(lines[1:], base, tenant)
    elif kind == "ValidationError":
        failure = _validation_failure(first, base, tenant)
        failures = [failure] if failure else []
    elif kind == "ExportError":
        failure = _export_failure(first, base, tenant)
        failures = [failure] if failure else []
    return failures or [ClientFailure(**base, problem="Not loaded.", advice=OUR_SIDE, ours=True)]


def client_failures(tenant: Tenant, row: dict, scrub: Scrubber) -> list[ClientFailure]:
    """diagnose, with every text field scrubbed of secrets, URLs and paths outside the export."""
    scrubbed = []
    for failure in diagnose(tenant, row):
        fields = {
            name: scrub(value) if isinstance(value, str) else value
            for name, value in vars(failure).items()
        }
        scrubbed.append(ClientFailure(**fields))
    return scrubbed
