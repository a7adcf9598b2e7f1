"""The export contract's row rules as SQL, checked inside ClickHouse on every row of every file.

One list of rules serves both paths. The fast path is the INSERT itself: each rule is a throwIf
guard (its message a constant naming the column and the rule), and required columns are read as
non-Nullable with input_format_null_as_default = 0, so a null stops the read instead of becoming
'' or 0. Only when an INSERT fails does `diagnose` read the same files again, grouped by `_path`,
to name the file, column, rows broken and the first such row and value. No row reaches Python.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client

from atlas_dagster import sql
from atlas_dagster.domains import Column, Domain, Kind
from atlas_dagster.validation.schema import DaySchema, ValidationError

# Decimal(18, 4) holds 14 integer digits: a double at or above this cannot be stored exactly.
MONEY_LIMIT = 100_000_000_000_000
# Violations named in one error message; the rest are counted.
SHOWN_VIOLATIONS = 10


@dataclass(frozen=True)
class RowRule:
    column: str
    broken: str  # what a row breaking the rule has, e.g. "is negative"
    condition: str  # SQL, true for a row that breaks the rule; values only as bound parameters


@dataclass(frozen=True)
class Violation:
    file: str
    column: str
    broken: str
    rows: int
    first_row: int  # 0-based row number within the file
    value: str


class RowContractError(ValidationError):
    """Rows of the day's files break the export contract; names day, file, column and row."""


def _money_rules(column: Column, day_schema: DaySchema) -> list[RowRule]:
    name = column.name
    rules = []
    wide = day_schema.decimal_type(name)
    if name in day_schema.float_money_columns:
        rules.append(RowRule(name, "is NaN or infinite", f"NOT isFinite({name})"))
    if name in day_schema.float_money_columns or wide:
        rules.append(RowRule(name, "does not fit Decimal(18, 4)", f"{name} >= {MONEY_LIMIT}"))
    if wide:
        # A decimal wider than 4 places is stored only when its further digits are zeros
        # (BigQuery's NUMERIC writes 12.340000000): money is never rounded silently.
        broken = "has non-zero digits past the 4th decimal place"
        rules.append(RowRule(name, broken, f"{name} != round({name}, 4)"))
    rules.append(RowRule(name, "is negative", f"{name} < 0"))
    return rules


def value_rules(
    domain: Domain, day_schema: DaySchema, day: str = "{partition_date:Date}"
) -> list[RowRule]:
    """The rules on values, in the INSERT as guards (nulls are refused by the read itself).

    `day` is the SQL of the partition's day: the bound parameter, or, when verify reads many
    days' files in one query, the day each row's file was listed under."""
    rules = [
        RowRule("event_id", "is empty", "event_id = ''"),
        RowRule(
            "organization_id",
            "names another tenant than the partition's",
            "organization_id != {organization_id:String}",
        ),
        RowRule(
            "brand_id", "names another tenant than the partition's", "brand_id != {brand_id:String}"
        ),
        RowRule(
            "event_timestamp",
            "is outside the partition's UTC day",
            f"toDate(event_timestamp, 'UTC') != {day}",
        ),
        RowRule(
            "event_type",
            "is not an event type of this domain",
            "lower(trim(event_type)) NOT IN {event_types:Array(String)}",
        ),
        RowRule("user_id", "is empty", "user_id = ''"),
    ]
    for column in domain.extra_columns:
        if column.kind is Kind.MONEY:
            rules.extend(_money_rules(column, day_schema))
    return rules


def null_rules(domain: Domain) -> list[RowRule]:
    """Required columns must hold a value in every row (checked by the diagnosis only)."""
    required = [c for c in domain.columns if not c.nullable]
    return [RowRule(c.name, "is null", f"isNull({c.name})") for c in required]


def guards(rules: list[RowRule]) -> str:
    """The INSERT's WHERE: one throwIf per rule; its constant message names column and rule."""
    # ifNull: a condition on a Nullable column is NULL on a null row, and a NULL in WHERE would
    # drop that row silently instead of loading it.
    return "\n  AND ".join(
        f"throwIf(ifNull({rule.condition}, 0), "
        f"{_literal(f'refused: column {rule.column} {rule.broken}')}) = 0"
        for rule in rules
    )


def _literal(text: str) -> str:
    """A constant SQL string of our own making (rule texts, never input): quotes escaped."""
    return "'" + text.replace("'", "''") + "'"


def rule_parameters(tenant_ids: tuple[str, str], day: dt.date, domain: Domain) -> dict:
    return {
        "organization_id": tenant_ids[0],
        "brand_id": tenant_ids[1],
        "partition_date": day,
        "event_types": list(domain.event_types),
    }


def diagnose(
    client: Client,
    source_function: str,
    parameters: dict[str, object],
    rules: list[RowRule],
    folder_columns: str = "",
) -> list[Violation]:
    """Every rule broken in each file, read inside ClickHouse (the files' columns as Nullable);
    `folder_columns`: the WITH clause of the columns read from folder names (statements.py)."""
    aggregates = []
    for i, rule in enumerate(rules):
        aggregates.append(
            f"countIf({rule.condition}) AS broken_{i}, "
            f"minIf(_row_number, {rule.condition}) AS first_{i}, "
            f"argMinIf(ifNull(toString({rule.column}), 'NULL'), _row_number, {rule.condition}) "
            f"AS value_{i}"
        )
    text = sql.query(
        "diagnose_rows",
        aggregates=",\n       ".join(aggregates),
        source_function=source_function,
        folder_columns=folder_columns,
    )
    result = client.query(text, parameters=parameters)
    violations = []
    for row in result.result_rows:
        file = row[0]
        for i, rule in enumerate(rules):
            broken, first, value = row[1 + 3 * i : 4 + 3 * i]
            if broken:
                violations.append(
                    Violation(file, rule.column, rule.broken, int(broken), int(first), str(value))
                )
    return violations


def describe(day: dt.date, domain: Domain, violations: list[Violation]) -> str:
    files = sorted({v.file for v in violations})
    lines = [
        f"{day} {domain.name}: {len(files)} file(s) break the export contract; the day is "
        "refused and nothing of it is kept:"
    ]
    for v in violations[:SHOWN_VIOLATIONS]:
        lines.append(
            f"{v.file}: column {v.column} {v.broken} in {v.rows} row(s), first at row {v.first_row}"
            f" (0-based) with value {v.value[:80]!r}"
        )
    if len(violations) > SHOWN_VIOLATIONS:
        lines.append(f"… and {len(violations) - SHOWN_VIOLATIONS} more (file, column) violations")
    return "\n".join(lines)


# A value the engine cannot read at all makes the whole file unreadable, so neither the INSERT's
# guards nor the diagnosis reach it: the engine's own error names the column and the file.
# Codes: VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE (an INT96 outside 1677-09-21..2262-04-11 in
# chDB 26.9), DECIMAL_OVERFLOW, CANNOT_CONVERT_TYPE.
UNREADABLE_CODES = ("Code: 321.", "Code: 407.", "Code: 70.")
_ENGINE_COLUMN = re.compile(r"column: ([A-Za-z0-9_]+):")
_ENGINE_FILE = re.compile(r"\(in file/uri ([^)]+)\)")
_INT96_DAY = re.compile(r"INT96 timestamp out of range: julian day (-?[0-9]+)")
UNIX_EPOCH_JULIAN_DAY = 2_440_588


def unreadable_value(
    exc: BaseException, day: dt.date, domain: Domain, uris: list[str]
) -> RowContractError | None:
    """The engine's refusal of a value it cannot read, as a contract error naming the file and
    column; None for any other failure. `uris`: the day's files (the engine names a path)."""
    message = str(exc)
    column, path = _ENGINE_COLUMN.search(message), _ENGINE_FILE.search(message)
    if not any(code in message for code in UNREADABLE_CODES) or not (column and path):
        return None
    name = path.group(1).rstrip("/").rsplit("/", 1)[-1]
    uri = next((u for u in uris if u.rsplit("/", 1)[-1] == name), path.group(1))
    int96 = _INT96_DAY.search(message)
    if int96:
        offset = int(int96.group(1)) - UNIX_EPOCH_JULIAN_DAY
        try:
            when = str(dt.date(1970, 1, 1) + dt.timedelta(days=offset))
        except OverflowError:
            when = f"julian day {int96.group(1)}"
        problem = (
            f"holds an INT96 timestamp ({when}) outside 1677-09-21..2262-04-11, which ClickHouse "
            "cannot read, so the whole file is unreadable; fix the value, or write timestamps "
            "as INT64 (Spark: spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS)"
        )
    else:
        problem = (
            "holds a value the engine cannot read: "
            + message.split(":", 2)[-1].split(": read stage", 1)[0].strip()[:300]
        )
    return RowContractError(
        f"{day} {domain.name}: {uri}: column {column.group(1)} {problem}; the day is refused and "
        "nothing of it is kept"
    )
