"""Validates a bounded sample of each file's rows with pandera (never a whole file in memory)."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pandera.pandas as pa_schema

from atlas_dagster.domains import Domain, Kind
from atlas_dagster.exports.layout import DayExport, ExportSource
from atlas_dagster.tenants import Tenant
from atlas_dagster.validation.schema import ValidationError

SAMPLE_ROWS = 1000


def sample_schema(domain: Domain, tenant: Tenant, day: dt.date) -> pa_schema.DataFrameSchema:
    day_start = pd.Timestamp(day, tz="UTC")
    day_end = day_start + pd.Timedelta(days=1)
    columns: dict[str, pa_schema.Column] = {
        "event_id": pa_schema.Column(str, pa_schema.Check.str_length(min_value=1)),
        "event_type": pa_schema.Column(
            str,
            pa_schema.Check(
                lambda s: s.str.strip().str.lower().isin(domain.event_types),
                error=f"event_type must be one of {list(domain.event_types)}",
            ),
        ),
        "event_timestamp": pa_schema.Column(
            checks=[
                pa_schema.Check.greater_than_or_equal_to(day_start),
                pa_schema.Check.less_than(day_end),
            ]
        ),
        "organization_id": pa_schema.Column(str, pa_schema.Check.equal_to(tenant.organization_id)),
        "brand_id": pa_schema.Column(str, pa_schema.Check.equal_to(tenant.brand_id)),
        "user_id": pa_schema.Column(str, pa_schema.Check.str_length(min_value=1)),
    }
    for column in domain.extra_columns:
        if column.kind is Kind.MONEY:
            columns[column.name] = pa_schema.Column(
                checks=pa_schema.Check(lambda s: s.astype(float) >= 0, error="must be >= 0"),
                nullable=column.nullable,
            )
    return pa_schema.DataFrameSchema(columns, strict=False, coerce=False)


def check_sample(
    source: ExportSource, day_export: DayExport, domain: Domain, tenant: Tenant, day: dt.date
) -> int:
    """Checks the first rows of every file; returns how many rows were sampled."""
    schema = sample_schema(domain, tenant, day)
    names = [c.name for c in domain.columns]
    sampled = 0
    for export_file in day_export.files:
        parquet = source.open(export_file)
        batch = next(parquet.iter_batches(batch_size=SAMPLE_ROWS, columns=names), None)
        if batch is None:
            continue
        frame = batch.to_pandas()
        frame["event_timestamp"] = pd.to_datetime(frame["event_timestamp"], utc=True)
        try:
            schema.validate(frame, lazy=True)
        except pa_schema.errors.SchemaErrors as exc:
            failures = exc.failure_cases.head(3)
            detail = "; ".join(
                f"column {row.column}: {row.check} (found {row.failure_case!r})"
                for row in failures.itertuples()
            )
            raise ValidationError(
                f"{export_file.uri}: sample rows break the contract: {detail}"
            ) from exc
        sampled += len(frame)
    return sampled
