"""The raw checks' re-read of a window of one tenant-domain's exports, in bulk: one listing pass,
footers on a bounded pool of threads, one footer-statistics validation, one row-rule query per
chunk of days. Each day ends with what reading it alone gives it (files, footer rows, the same
contract error naming day, file and column): a step that fails for a whole chunk is done again
day by day. No row reaches Python."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

from clickhouse_connect.driver.client import Client

from atlas_dagster.domains import Domain
from atlas_dagster.exports.fingerprint import FileStamp
from atlas_dagster.exports.layout import (
    FOLDER_DAY_SQL,
    DayExport,
    ExportError,
    ExportSource,
    tenant_root,
)
from atlas_dagster.loading.day_load import PreparedDay, diagnose_rows
from atlas_dagster.loading.statements import diagnosis_source, folder_columns
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import Tenant
from atlas_dagster.validation import rows
from atlas_dagster.validation.schema import DaySchema, day_schemas

# Days whose files one row-rule query reads. Per day on tiny exports (bench/bench_verify.py), a
# query of its own cost 28 ms (17 ms in the engine, 10 ms binding the long rule text); one query
# for 128 days costs about as much as one day did, and keeps the glob of file names short.
CHUNK_DAYS = 128


@dataclass(frozen=True)
class ExportState:
    """What the checks need of one day's export."""

    files: int
    rows: int | None  # from the footers; None when the files cannot be listed or read
    error: str | None  # the contract error, None when the export meets it
    # The files as listed now, to compare with the fingerprint the load stored (verify's
    # re-read; None right after a load, which just stored them).
    stamps: tuple[FileStamp, ...] | None = None

    @classmethod
    def of(cls, export: DayExport, error: str | None) -> ExportState:
        stamps = tuple(f.stamp() for f in export.files)
        return cls(files=len(export.files), rows=export.num_rows, error=error, stamps=stamps)


def window_states(
    client: Client,
    clickhouse: ClickHouseResource,
    tenant: Tenant,
    domain: Domain,
    days: list[dt.date],
) -> dict[dt.date, ExportState]:
    """Every day's ExportState, read in bulk."""
    try:
        listed = ExportSource(tenant).list_window(domain.name, days)
    except Exception as exc:  # the check reports the export's problem instead of raising it
        error = clickhouse.redact(f"{type(exc).__name__}: {exc}", tenant.s3.credentials() or ())
        return {day: ExportState(files=0, rows=None, error=error) for day in days}
    return listed_states(client, clickhouse, tenant, domain, listed)


def listed_states(
    client: Client,
    clickhouse: ClickHouseResource,
    tenant: Tenant,
    domain: Domain,
    listed: dict[dt.date, DayExport | ExportError],
) -> dict[dt.date, ExportState]:
    """The ExportState of days already listed (ExportSource.list_window): footers validated
    once, then the row rules inside ClickHouse, one query per chunk of days."""
    secrets = tenant.s3.credentials() or ()

    def failed(exc: Exception) -> str:
        return clickhouse.redact(f"{type(exc).__name__}: {exc}", secrets)

    states: dict[dt.date, ExportState] = {}
    exports: dict[dt.date, DayExport] = {}
    for day, listing in listed.items():
        if isinstance(listing, DayExport):
            exports[day] = listing
        else:
            states[day] = ExportState(files=0, rows=None, error=failed(listing))
    schemas = day_schemas(exports, domain, tenant)
    for day, schema in schemas.items():
        if isinstance(schema, Exception):
            states[day] = ExportState.of(exports.pop(day), failed(schema))
    for chunk in _chunks(sorted(exports), CHUNK_DAYS):
        for schema, group in _by_schema(chunk, schemas).items():
            errors = _row_errors(client, clickhouse, tenant, domain, schema, exports, group)
            for day in group:
                states[day] = ExportState.of(exports[day], errors.get(day))
    return states


def _chunks(days: list[dt.date], size: int) -> list[list[dt.date]]:
    return [days[i : i + size] for i in range(0, len(days), size)]


def _by_schema(
    days: list[dt.date], schemas: dict[dt.date, DaySchema | Exception]
) -> dict[DaySchema, list[dt.date]]:
    """Days read by one query must agree on their files' money types (decimal or double)."""
    groups: dict[DaySchema, list[dt.date]] = {}
    for day in days:
        schema = schemas[day]
        assert isinstance(schema, DaySchema)
        groups.setdefault(schema, []).append(day)
    return groups


def _row_errors(
    client: Client,
    clickhouse: ClickHouseResource,
    tenant: Tenant,
    domain: Domain,
    schema: DaySchema,
    exports: dict[dt.date, DayExport],
    days: list[dt.date],
) -> dict[dt.date, str]:
    """The row-rule error of each day that breaks a rule: one query for all the days' files, or
    day by day if that query fails (a file the engine cannot read names its own day then)."""
    secrets = tenant.s3.credentials() or ()
    cluster = clickhouse.resolved_cluster()
    try:
        window = {d: exports[d] for d in days}
        found = _window_violations(client, cluster, tenant, domain, schema, window, secrets)
    except Exception:
        found = None
    errors = {}
    for day in days:
        try:
            if found is None and exports[day].files:
                prepared = PreparedDay(tenant, domain, day, exports[day], schema, secrets)
                violations = diagnose_rows(client, prepared, cluster)
            else:
                violations = (found or {}).get(day, [])
        except Exception as exc:
            uris = [f.uri for f in exports[day].files]
            unreadable = rows.unreadable_value(exc, day, domain, uris)
            error = unreadable if unreadable is not None else exc
            errors[day] = clickhouse.redact(f"{type(error).__name__}: {error}", secrets)
            continue
        if violations:
            errors[day] = rows.describe(day, domain, violations)
    return errors


def _window_violations(
    client: Client,
    cluster: str | None,
    tenant: Tenant,
    domain: Domain,
    schema: DaySchema,
    exports: dict[dt.date, DayExport],
    credentials: tuple[str, ...],
) -> dict[dt.date, list[rows.Violation]]:
    """diagnose_rows over many days' files in one query: the export laid out as one folder (the
    tenant-domain's) whose file names are day/file paths, each row held to the UTC day of the
    folder its file sits in."""
    root = tenant_root(tenant, domain.name)  # above year=/month=/day=
    files, by_path = [], {}
    for day, export in exports.items():
        for export_file in export.files:
            name = export_file.uri[len(root) + 1 :]  # year=…/month=…/day=…/file
            files.append(replace(export_file, name=name))
            by_path[name] = (day, export_file.uri)
    if not files:  # only days with no events (a complete export): no row to read
        return {}
    window = DayExport(root, tuple(files))
    function, parameters = diagnosis_source(tenant, window, domain, schema, credentials, cluster)
    tenant_ids = (tenant.organization_id, tenant.brand_id)
    found = rows.diagnose(
        client,
        function,
        parameters | rows.rule_parameters(tenant_ids, min(exports), domain),
        rows.null_rules(domain) + rows.value_rules(domain, schema, day=FOLDER_DAY_SQL),
        folder_columns(schema),
    )
    by_day: dict[dt.date, list[rows.Violation]] = {}
    for violation in found:
        # _path is the engine's view of a file (a local path, or bucket/key): year/month/day/name
        day, uri = by_path["/".join(violation.file.rsplit("/", 4)[-4:])]
        by_day.setdefault(day, []).append(replace(violation, file=uri))
    return by_day
