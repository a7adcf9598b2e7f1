"""Checks export files against the registry: Arrow schema, and footer statistics with pandera."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pandas as pd
import pandera.pandas as pandera
import pyarrow as pa

from atlas_dagster.domains import Column, Domain, Kind
from atlas_dagster.exports.layout import DayExport, ExportFile
from atlas_dagster.tenants import Tenant


class ValidationError(Exception):
    """The export breaks the contract; the message names the file, column and types."""


EXPECTED = {
    Kind.STRING: "string (or binary)",
    Kind.ID: "string or integer (INT32, INT64, DECIMAL(p, 0))",
    Kind.TIMESTAMP: "timestamp (INT64 ms, µs or ns, or INT96)",
    Kind.MONEY: "decimal or double",
    Kind.DOUBLE: "double",
}
# The raw tables' money type: Decimal(18, 4), 14 integer digits and 4 decimal places.
MONEY_PRECISION, MONEY_SCALE = 18, 4
# The widest decimal ClickHouse reads (Decimal256).
MAX_DECIMAL_PRECISION = 76


@dataclass(frozen=True)
class DaySchema:
    """What the load needs to know about the day's physical types."""

    float_money_columns: frozenset[str]
    # Decimal money columns some file of the day writes wider than Decimal(18, 4) (Spark's and
    # Snowflake's DECIMAL(38, 4), BigQuery's NUMERIC (38, 9)), with the type they are read as;
    # the row rules then refuse a value that Decimal(18, 4) cannot hold exactly.
    wide_decimals: tuple[tuple[str, str], ...] = ()

    # Contract columns no file of the day holds, read from its `name=value` folder names instead
    # (Spark's partitionBy columns: organization_id, brand_id).
    from_folders: frozenset[str] = frozenset()

    def decimal_type(self, column: str) -> str | None:
        return dict(self.wide_decimals).get(column)


def _matches(kind: Kind, arrow_type: pa.DataType) -> bool:
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if kind is Kind.ID:
        # An integer key (a warehouse's BIGINT, DECIMAL(38, 0)) is read as its exact decimal
        # text by the engine itself; a double is refused: it cannot hold every id exactly.
        return _matches(Kind.STRING, arrow_type) or _is_integer(arrow_type)
    if kind is Kind.STRING:
        # binary: BYTE_ARRAY without the UTF8 annotation (Impala, Hive, older Spark writers).
        return any(
            check(arrow_type)
            for check in (
                pa.types.is_string,
                pa.types.is_large_string,
                pa.types.is_binary,
                pa.types.is_large_binary,
            )
        )
    if kind is Kind.TIMESTAMP:
        # Every unit and zone: the file stores an instant (INT64 since the epoch, or INT96),
        # which ClickHouse reads as such; its UTC day is the partition's. Nanoseconds are
        # truncated to the raw table's microseconds, which never moves a row to another day.
        return pa.types.is_timestamp(arrow_type)
    if kind is Kind.MONEY:
        return pa.types.is_decimal(arrow_type) or pa.types.is_float64(arrow_type)
    return pa.types.is_floating(arrow_type)


def _is_integer(arrow_type: pa.DataType) -> bool:
    return pa.types.is_integer(arrow_type) or (
        pa.types.is_decimal(arrow_type) and arrow_type.scale == 0
    )


def _wide_decimal(decimals: list[pa.DataType]) -> str | None:
    """The type a money column's decimals are read as when some are wider than Decimal(18, 4):
    enough integer digits for the widest file and the largest scale, so that reading never
    rounds (ClickHouse truncates a decimal read into a smaller scale) nor overflows."""
    scale = max(t.scale for t in decimals)
    integer_digits = max(t.precision - t.scale for t in decimals)
    if scale <= MONEY_SCALE and integer_digits <= MONEY_PRECISION - MONEY_SCALE:
        return None
    precision = 38 if integer_digits + scale <= 38 else MAX_DECIMAL_PRECISION
    return f"Decimal({precision}, {min(scale, precision)})"


def _utc_day(value: object) -> dt.date | None:
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return aware.astimezone(dt.UTC).date()
    return None


def footer_statistics(
    export_file: ExportFile, domain: Domain, tenant: Tenant, day: dt.date
) -> pd.DataFrame:
    """One row per row group and column: the footer's statistics beside what the partition
    expects of them. Metadata only: no data row is read."""
    return _frame(_footer_records(export_file, domain, tenant, day))


def _frame(records: list[dict]) -> pd.DataFrame:
    # object columns: min and max hold strings, timestamps or decimals depending on the column
    return pd.DataFrame.from_records(records, columns=_FOOTER_COLUMNS).astype(object)


def _footer_records(
    export_file: ExportFile, domain: Domain, tenant: Tenant, day: dt.date
) -> list[dict]:
    metadata = export_file.metadata
    expected_value = {"organization_id": tenant.organization_id, "brand_id": tenant.brand_id}
    names = metadata.schema.names
    records = []
    for column in domain.columns:
        if column.name not in names:  # read from its folder name (check_schema allows no other)
            continue
        index = names.index(column.name)
        for group in range(metadata.num_row_groups):
            stats = metadata.row_group(group).column(index).statistics
            if stats is None:
                continue
            has_min_max = stats.has_min_max
            records.append(
                {
                    "column": column.name,
                    "required": not column.nullable,
                    "null_count": stats.null_count if stats.has_null_count else 0,
                    "min": _as_stored(column, stats.min) if has_min_max else None,
                    "max": _as_stored(column, stats.max) if has_min_max else None,
                    "expected": expected_value.get(column.name) if has_min_max else None,
                    "min_day": _utc_day(stats.min) if has_min_max else None,
                    "max_day": _utc_day(stats.max) if has_min_max else None,
                    "day": day,
                }
            )
    return records


def _as_stored(column: Column, value: object) -> object:
    """A footer statistic as the column's value is stored: an integer id as its decimal text, a
    binary string (BYTE_ARRAY without UTF8, pyarrow gives bytes) as text, so that it compares
    with the partition's ids."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if column.kind is Kind.ID and not isinstance(value, str):
        return str(value)
    return value


_FOOTER_COLUMNS = [
    "column", "required", "null_count", "min", "max", "expected", "min_day", "max_day", "day",
]  # fmt: skip

# The contract's rules that footer statistics can prove or refute without reading a row; every
# row is checked again inside ClickHouse by the INSERT's guards (validation/rows.py), so a file
# written without statistics is held to the same rules.
FOOTER_RULES = pandera.DataFrameSchema(
    checks=[
        pandera.Check(
            lambda f: ~f["required"].astype(bool) | (f["null_count"] == 0),
            name="holds null values; the export contract requires a value in every row",
        ),
        pandera.Check(
            lambda f: (
                f["expected"].isna() | ((f["min"] == f["expected"]) & (f["max"] == f["expected"]))
            ),
            name="holds another tenant's ids; the day is refused and nothing is loaded",
        ),
        pandera.Check(
            lambda f: (
                f["min_day"].isna() | ((f["min_day"] == f["day"]) & (f["max_day"] == f["day"]))
            ),
            name="falls outside the partition's UTC day",
        ),
    ],
)


def _check_statistics(
    export_file: ExportFile, domain: Domain, tenant: Tenant, day: dt.date
) -> None:
    """Footer statistics catch nulls, foreign tenants and other days without reading data."""
    stats = footer_statistics(export_file, domain, tenant, day)
    if stats.empty:
        return
    try:
        FOOTER_RULES.validate(stats, lazy=True)
    except pandera.errors.SchemaErrors as errors:
        raise ValidationError(
            _describe_failures(export_file, stats, errors.failure_cases)
        ) from None


def _describe_failures(export_file: ExportFile, stats: pd.DataFrame, failures: pd.DataFrame) -> str:
    problems = []
    for check, index in failures[["check", "index"]].drop_duplicates().itertuples(index=False):
        row = stats.loc[index]
        found = (
            f"{int(row['null_count'])} null values"
            if "null" in check
            else f"{row['min']!r}..{row['max']!r}"
        )
        problem = f"column {row['column']} ({found}) {check}"
        if "tenant" in check:
            problem += f" (the partition's is {row['expected']!r})"
        if "UTC day" in check:
            problem += f" {row['day']}"
        if problem not in problems:
            problems.append(problem)
    return f"{export_file.uri}: " + "; ".join(problems[:5])


def footer_failures(
    exports: dict[dt.date, DayExport], domain: Domain, tenant: Tenant
) -> set[dt.date]:
    """The days whose footer statistics break FOOTER_RULES, in one validation for all of them
    instead of one per file (≈7 ms a day on tiny exports, measured by bench/bench_verify.py):
    the rules hold row by row, so a day passes here exactly when each of its files passes
    `check_schema`'s own validation."""
    records = [
        record
        for day, day_export in exports.items()
        for export_file in day_export.files
        for record in _footer_records(export_file, domain, tenant, day)
    ]
    stats = _frame(records)
    if stats.empty:
        return set()
    try:
        FOOTER_RULES.validate(stats, lazy=True)
    except pandera.errors.SchemaErrors as errors:
        indexes = errors.failure_cases["index"]
        if indexes.isna().any():  # a failure not tied to a row: let every day find its own
            return set(exports)
        return {stats.loc[index, "day"] for index in indexes}
    return set()


def check_schema(
    day_export: DayExport, domain: Domain, tenant: Tenant, day: dt.date, statistics: bool = True
) -> DaySchema:
    """The day's files against the contract: columns (in the file, or a string or id column in
    its folder names), types, and (unless `statistics` is False, for days footer_failures
    already cleared) their footer statistics."""
    float_money: dict[str, set[bool]] = {}
    decimals: dict[str, list[pa.DataType]] = {}
    # column -> where each file holds it ("file" or "folder") -> the first such file
    held: dict[str, dict[str, str]] = {}
    for export_file in day_export.files:
        schema = export_file.metadata.schema.to_arrow_schema()
        for column in domain.columns:
            if column.name not in schema.names:
                _check_folder_column(export_file, column)
                held.setdefault(column.name, {}).setdefault("folder", export_file.uri)
                continue
            held.setdefault(column.name, {}).setdefault("file", export_file.uri)
            found = schema.field(column.name).type
            if not _matches(column.kind, found):
                raise ValidationError(_type_error(export_file, column, found))
            if column.kind is Kind.MONEY:
                float_money.setdefault(column.name, set()).add(pa.types.is_floating(found))
                if pa.types.is_decimal(found):
                    decimals.setdefault(column.name, []).append(found)
        if statistics:
            _check_statistics(export_file, domain, tenant, day)
    _refuse_mixed(day_export, float_money, held)
    wide = {name: _wide_decimal(types) for name, types in decimals.items()}
    return DaySchema(
        frozenset(name for name, kinds in float_money.items() if True in kinds),
        tuple((name, read_as) for name, read_as in sorted(wide.items()) if read_as),
        frozenset(name for name, where in held.items() if set(where) == {"folder"}),
    )


def _check_folder_column(export_file: ExportFile, column: Column) -> None:
    """A column the file lacks is read from its folder name (`organization_id=…/`), as Spark's
    partitionBy writes it; only a string or id column can be, and only if that folder exists."""
    in_folder = export_file.folder_value(column.name) is not None
    if not in_folder or column.kind not in (Kind.STRING, Kind.ID):
        raise ValidationError(
            f"{export_file.uri}: missing column {column.name} (expected {EXPECTED[column.kind]})"
        )


def _type_error(export_file: ExportFile, column: Column, found: pa.DataType) -> str:
    error = f"{export_file.uri}: column {column.name} has type {found}, "
    error += f"expected {EXPECTED[column.kind]}"
    if column.kind is Kind.ID and (pa.types.is_floating(found) or pa.types.is_decimal(found)):
        # 12345678901234567 as a double reads back as 12345678901234568.
        error += "; an id with a fraction or in floating point cannot be stored exactly"
    return error


def _refuse_mixed(
    day_export: DayExport, float_money: dict[str, set[bool]], held: dict[str, dict[str, str]]
) -> None:
    """One day's files are read by one statement: they must agree on each money column's kind
    and on where each column comes from (the file or the folder name)."""
    mixed = sorted(name for name, kinds in float_money.items() if len(kinds) > 1)
    if mixed:
        raise ValidationError(
            f"{day_export.day_uri}: files disagree on the type of {', '.join(mixed)} "
            "(some decimal, some double); export the day with one type"
        )
    for name, where in held.items():
        if len(where) > 1:
            raise ValidationError(
                f"{where['file']}: holds column {name}, which {where['folder']} has only in its "
                f"folder name ({name}=…); export every file of the day the same way"
            )


def _timestamp_reading(physical: str, arrow_type: pa.TimestampType) -> str | None:
    stored = "DateTime64(6, 'UTC')"
    if physical == "INT96":
        return f"INT96 (Spark/Hive/Impala legacy) → {stored}, nanoseconds truncated to µs"
    notes = []
    if arrow_type.unit == "ns":
        notes.append(f"INT64 nanoseconds → {stored}, truncated to µs (never another day)")
    if arrow_type.tz is None:
        notes.append("no UTC annotation: read as UTC")
    elif arrow_type.tz not in ("UTC", "+00:00", "Etc/UTC"):
        notes.append(f"zone {arrow_type.tz}: the stored instant is read, its UTC day counts")
    return "; ".join(notes) or None


def _money_reading(arrow_type: pa.DataType) -> str | None:
    if pa.types.is_floating(arrow_type):
        return "DOUBLE → Decimal(18, 4) through its shortest decimal, rounded to 4 places"
    wide = _wide_decimal([arrow_type])
    if wide is None:
        return None
    return (
        f"DECIMAL({arrow_type.precision}, {arrow_type.scale}) → read as {wide}, stored as "
        "Decimal(18, 4); a row with more than 14 integer digits or non-zero digits past the "
        "4th decimal place is refused"
    )


def _id_reading(physical: str, arrow_type: pa.DataType) -> str | None:
    if pa.types.is_decimal(arrow_type):
        return f"DECIMAL({arrow_type.precision}, 0) → String, its exact decimal digits"
    if pa.types.is_integer(arrow_type):
        return f"{physical} ({arrow_type}) → String, its exact decimal digits"
    if pa.types.is_binary(arrow_type):
        return "BYTE_ARRAY without UTF8 annotation → String"
    return None


def column_readings(export_file: ExportFile, domain: Domain) -> tuple[str, ...]:
    """Where the load reads each contract column of the file from, and what it reads as: the
    columns only in its folder names first (Spark's partitionBy), then those a tool writes in a
    form of its own (INT96, nanoseconds, wide decimals, doubles, integer ids, binary strings);
    the other columns are read from the file in the contract's plain form. Footer only."""
    schema = export_file.metadata.schema
    arrow_schema = schema.to_arrow_schema()
    from_folders = [c.name for c in domain.columns if c.name not in arrow_schema.names]
    readings = []
    if from_folders:
        folders = "/".join(f"{name}=…" for name in from_folders)
        readings.append(f"{', '.join(from_folders)}: not in the file, from its folders ({folders})")
    for column in domain.columns:
        if column.name in from_folders:
            continue
        arrow_type = arrow_schema.field(column.name).type
        if pa.types.is_dictionary(arrow_type):
            arrow_type = arrow_type.value_type
        physical = schema.column(schema.names.index(column.name)).physical_type
        reading = None
        if column.kind is Kind.TIMESTAMP and pa.types.is_timestamp(arrow_type):
            reading = _timestamp_reading(physical, arrow_type)
        elif column.kind is Kind.MONEY and _matches(Kind.MONEY, arrow_type):
            reading = _money_reading(arrow_type)
        elif column.kind in (Kind.STRING, Kind.ID) and _matches(column.kind, arrow_type):
            reading = _id_reading(physical, arrow_type)
        if reading:
            readings.append(f"{column.name}: {reading}")
    return tuple(readings)


def day_schemas(
    exports: dict[dt.date, DayExport], domain: Domain, tenant: Tenant
) -> dict[dt.date, DaySchema | Exception]:
    """check_schema of every day, its footer statistics validated once for all days; a day that
    fails anything is checked again alone, so that its error is the one check_schema gives."""
    schemas: dict[dt.date, DaySchema | Exception] = {}
    again = set()
    for day, export in exports.items():
        try:
            schemas[day] = check_schema(export, domain, tenant, day, statistics=False)
        except Exception:
            again.add(day)
    typed = {day: exports[day] for day in schemas}
    again |= footer_failures(typed, domain, tenant)
    for day in again:
        try:
            schemas[day] = check_schema(exports[day], domain, tenant, day)
        except Exception as exc:
            schemas[day] = exc
    return schemas
