"""The client_progress_report asset (one partition per tenant), its daily schedule and the sensor
that refreshes a tenant's report once a raw or gold run of it has ended."""

import datetime as dt
import hashlib
import time
from collections.abc import Iterator, Sequence

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetSpec,
    BackfillPolicy,
    DagsterRun,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    MetadataValue,
    RunRequest,
    RunsFilter,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    StaticPartitionsDefinition,
    define_asset_job,
    multi_asset,
    schedule,
    sensor,
)

from atlas_dagster.core.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from atlas_dagster.domains import RAW_ASSET_KEYS
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.orchestration.insert_limit import live_limit
from atlas_dagster.partitions import (
    is_tenant_day_key,
    run_partition_bounds,
    tenant_partitions,
    tenants_in_range,
)
from atlas_dagster.reporting.collect import TenantReport, collect_reports
from atlas_dagster.reporting.publish import Published, publish, tenant_folder
from atlas_dagster.reporting.render import as_markdown, duration, text_calendar
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.settings import DEFAULT_PARALLEL_INSERTS, Settings
from atlas_dagster.tenants import Tenant, tenant_by_key

REPORT_KEY = AssetKey("client_progress_report")
REPORT_JOB = "client_progress_reports"
REPORT_GROUP = "reports"
# Runs whose end refreshes their tenants' reports: raw loads and gold replays.
LOAD_ASSET_KEYS = RAW_ASSET_KEYS | frozenset(AssetKey(name) for name in GOLD_TABLES)
ENDED = [DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED]
# The sensor gathers every run ended since its last tick into one report run: at most one
# report run this often, however many loads end.
AFTER_LOADS_SECONDS = 120


def report_metadata(report: TenantReport, published: Published) -> dict[str, MetadataValue]:
    """The summary table and the picture (Markdown renders in the UI), and where the page is."""
    failed = sum(d.failed for d in report.domains)
    return {
        "summary": MetadataValue.md(as_markdown(report)),
        "calendar": MetadataValue.md(text_calendar(report)),
        "report": (
            MetadataValue.url(published.html)
            if published.html.startswith("s3://")
            else MetadataValue.path(published.html)
        ),
        "percent_complete": MetadataValue.float(round(report.percent, 1)),
        "days_done": MetadataValue.int(report.done_days),
        "days_expected": MetadataValue.int(report.expected_days),
        "days_failed": MetadataValue.int(failed),
        "loading_left": MetadataValue.text(duration(report.eta_seconds)),
    }


def write_reports(
    clickhouse: ClickHouseResource,
    tenants: Sequence[Tenant],
    location: str,
    limit: int = DEFAULT_PARALLEL_INSERTS,
) -> list[tuple[TenantReport, Published]]:
    """Every tenant's report from one read of the fleet, each written to its own folder; the
    time left counts at most `limit` loads at once (the pool's live limit)."""
    folders = [tenant_folder(location, t) for t in tenants]  # a bad location fails first
    reports = collect_reports(clickhouse, tenants, limit=limit)
    return [
        (report, publish(report, tenant, folder))
        for report, tenant, folder in zip(reports, tenants, folders, strict=True)
    ]


def report_asset(
    tenants: Sequence[Tenant],
    partitions: StaticPartitionsDefinition,
    location: str,
    parallel_inserts: int,
):
    """`location`: ATLAS_REPORTS_LOCATION; `parallel_inserts`: ATLAS_MAX_PARALLEL_INSERTS, what
    the time left counts at once while the pool has no limit of its own (both from the code
    location's settings)."""

    @multi_asset(
        name="client_progress_report",
        specs=[
            AssetSpec(
                key=REPORT_KEY,
                group_name=REPORT_GROUP,
                partitions_def=partitions,
                kinds={"html"},
                skippable=True,
                description=(
                    "Each client's progress report (HTML, JSON, CSV): days loaded per domain, "
                    "a calendar, failures with what to change in the export, gold status. "
                    "Written under ATLAS_REPORTS_LOCATION."
                ),
            )
        ],
        # One run for any set of tenants: their reports come from one grouped read.
        backfill_policy=BackfillPolicy.single_run(),
    )
    def client_progress_report(
        context: AssetExecutionContext, clickhouse: ClickHouseResource
    ) -> Iterator[AssetMaterialization]:
        chosen = [tenant_by_key(list(tenants), key) for key in context.partition_keys]
        limit = live_limit(context.instance, parallel_inserts)
        for report, published in write_reports(clickhouse, chosen, location, limit):
            context.log.info(f"{report.key}: {report.percent:.1f}% → {published.html}")
            yield AssetMaterialization(
                asset_key=REPORT_KEY,
                partition=report.key,
                metadata=report_metadata(report, published),
            )

    return client_progress_report


def range_request(tenants: Sequence[Tenant], run_key: str | None = None) -> RunRequest:
    """One run over the tenants' range (a single key when there is one tenant)."""
    first, last = tenants[0].key, tenants[-1].key
    if first == last:
        return RunRequest(run_key=run_key, partition_key=first)
    tags = {ASSET_PARTITION_RANGE_START_TAG: first, ASSET_PARTITION_RANGE_END_TAG: last}
    return RunRequest(run_key=run_key, tags=tags)


def report_schedule(tenants: Sequence[Tenant], job, cron: str) -> ScheduleDefinition:
    """Every tenant's report on `cron` (ATLAS_REPORT_CRON)."""

    @schedule(
        name="client_progress_reports_daily",
        cron_schedule=cron,
        job=job,
        default_status=DefaultScheduleStatus.RUNNING,
        execution_timezone="UTC",
        description="Refreshes every tenant's progress report (ATLAS_REPORT_CRON).",
    )
    def client_progress_reports_daily(
        context: ScheduleEvaluationContext,
    ) -> RunRequest | SkipReason:
        if not tenants:
            return SkipReason("the tenants file lists no tenant")
        return range_request(tenants)

    return client_progress_reports_daily


def run_tenants(run: DagsterRun, tenants: Sequence[Tenant]) -> list[Tenant]:
    """The tenants a raw or gold run covered: its partition or its range's tenant ends."""
    bounds = run_partition_bounds(run.tags)
    if bounds is None:
        return []
    if run.asset_selection:
        loads = bool(LOAD_ASSET_KEYS & set(run.asset_selection))
    else:
        # A run of every asset of its job (no selection recorded): only raw and gold assets
        # are partitioned by date|tenant.
        loads = is_tenant_day_key(bounds[0])
    return tenants_in_range(list(tenants), *bounds) if loads else []


def _ended_runs(context: SensorEvaluationContext, after: float) -> list:
    records = context.instance.get_run_records(
        RunsFilter(
            statuses=ENDED,
            updated_after=dt.datetime.fromtimestamp(after, dt.UTC),
        ),
        order_by="update_timestamp",
        ascending=True,
        limit=1000,
    )
    return [r for r in records if r.update_timestamp.timestamp() > after]


def after_loads_sensor(tenants: Sequence[Tenant], job) -> SensorDefinition:
    @sensor(
        name="client_progress_reports_after_loads",
        job=job,
        minimum_interval_seconds=AFTER_LOADS_SECONDS,
        default_status=DefaultSensorStatus.RUNNING,
        description=(
            "Refreshes the progress reports of the tenants whose raw or gold runs ended since "
            "its last tick, in one report run."
        ),
    )
    def client_progress_reports_after_loads(
        context: SensorEvaluationContext,
    ) -> RunRequest | SkipReason:
        after = float(context.cursor or 0)
        if not context.cursor:
            # First tick: start from now rather than report every run of the history.
            context.update_cursor(str(time.time()))
            return SkipReason("started: reports follow the runs that end from now on")
        records = _ended_runs(context, after)
        if not records:
            return SkipReason("no raw or gold run ended")
        context.update_cursor(str(records[-1].update_timestamp.timestamp()))
        keys = {t.key for r in records for t in run_tenants(r.dagster_run, tenants)}
        chosen = [t for t in tenants if t.key in keys]
        if not chosen:
            return SkipReason(f"{len(records)} run(s) ended, none loading a tenant")
        ids = ",".join(sorted(r.dagster_run.run_id for r in records))
        run_key = "after-" + hashlib.sha1(ids.encode()).hexdigest()[:16]
        # The range from the first to the last of them: tenants between are refreshed too,
        # which costs nothing more (one grouped read).
        return range_request(chosen, run_key)

    return client_progress_reports_after_loads


def report_job():
    return define_asset_job(REPORT_JOB, selection=[REPORT_KEY])


def report_definitions_parts(tenants: Sequence[Tenant], settings: Settings):
    """The asset, its job, the schedule and the sensor, for definitions.py (`settings`: the
    code location's)."""
    partitions = tenant_partitions(list(tenants))
    job = report_job()
    return (
        report_asset(
            tenants, partitions, settings.reports_location, settings.load.parallel_inserts
        ),
        job,
        report_schedule(tenants, job, settings.report_cron),
        after_loads_sensor(tenants, job),
    )
