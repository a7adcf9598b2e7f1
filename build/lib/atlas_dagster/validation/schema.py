"""Checks each export file's Arrow schema and footer statistics against the domain registry."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa

from atlas_dagster.domains import Column, Domain, Kind
from atlas_dagster.exports.layout import DayExport, ExportFile
from atlas_dagster.tenants import Tenant


class ValidationError(Exception):
    """The export breaks the contract; the message names the file, column and types."""


EXPECTED = {
    Kind.STRING: "string",
    Kind.TIMESTAMP: "timestamp[ms|us, UTC]",
    Kind.MONEY: "decimal(scale<=4) or double",
    Kind.DOUBLE: "double",
}


@dataclass(frozen=True)
class DaySchema:
    """What the load needs to know about the day's physical types."""

    float_money_columns: frozenset[str]


def _matches(kind: Kind, arrow_type: pa.DataType) -> bool:
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if kind is Kind.STRING:
        return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
    if kind is Kind.TIMESTAMP:
        return (
            pa.types.is_timestamp(arrow_type)
            and arrow_type.unit in ("ms", "us")
            and arrow_type.tz in (None, "UTC", "+00:00", "Etc/UTC")
        )
    if kind is Kind.MONEY:
        return (pa.types.is_decimal(arrow_type) and arrow_type.scale <= 4) or pa.types.is_float64(
            arrow_type
        )
    return pa.types.is_floating(arrow_type)


def _column_stats(export_file: ExportFile, column: str) -> list:
    metadata = export_file.metadata
    index = metadata.schema.names.index(column)
    return [metadata.row_group(i).column(index).statistics for i in range(metadata.num_row_groups)]


def _check_statistics(
    export_file: ExportFile, column: Column, tenant: Tenant, day: dt.date
) -> None:
    """Footer statistics catch nulls, foreign tenants and other days without reading data."""
    expected_value = {"organization_id": tenant.organization_id, "brand_id": tenant.brand_id}
    for stats in _column_stats(export_file, column.name):
        if stats is None:
            continue
        if not column.nullable and stats.has_null_count and stats.null_count > 0:
            raise ValidationError(
                f"{export_file.uri}: column {column.name} has {stats.null_count} null values; "
                "the export contract requires a value in every row"
            )
        if not stats.has_min_max:
            continue
        if column.name in expected_value and (
            stats.min != expected_value[column.name] or stats.max != expected_value[column.name]
        ):
            raise ValidationError(
                f"{export_file.uri}: column {column.name} holds {stats.min!r}..{stats.max!r} but "
                f"the partition's tenant is {tenant.key}; the day is refused and nothing is loaded"
            )
        if column.name == "event_timestamp":
            _check_day_bounds(export_file, stats.min, stats.max, day)


def _check_day_bounds(export_file: ExportFile, low: object, high: object, day: dt.date) -> None:
    def utc_day(value: object) -> dt.date | None:
        if isinstance(value, dt.datetime):
            aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
            return aware.astimezone(dt.UTC).date()
        return None

    for value in (low, high):
        found = utc_day(value)
        if found is not None and found != day:
            raise ValidationError(
                f"{export_file.uri}: event_timestamp {value} falls on {found}, outside the "
                f"partition's UTC day {day}"
            )


def check_schema(day_export: DayExport, domain: Domain, tenant: Tenant, day: dt.date) -> DaySchema:
    float_money: dict[str, set[bool]] = {}
    for export_file in day_export.files:
        schema = export_file.metadata.schema.to_arrow_schema()
        for column in domain.columns:
            if column.name not in schema.names:
                raise ValidationError(
                    f"{export_file.uri}: missing column {column.name} "
                    f"(expected {EXPECTED[column.kind]})"
                )
            found = schema.field(column.name).type
            if not _matches(column.kind, found):
                raise ValidationError(
                    f"{export_file.uri}: column {column.name} has type {found}, "
                    f"expected {EXPECTED[column.kind]}"
                )
            if column.kind is Kind.MONEY:
                float_money.setdefault(column.name, set()).add(pa.types.is_floating(found))
            _check_statistics(export_file, column, tenant, day)
    mixed = sorted(name for name, kinds in float_money.items() if len(kinds) > 1)
    if mixed:
        raise ValidationError(
            f"{day_export.day_uri}: files disagree on the type of {', '.join(mixed)} "
            "(some decimal, some double); export the day with one type"
        )
    return DaySchema(frozenset(name for name, kinds in float_money.items() if True in kinds))
