"""The raw verify job: one run re-reads a tenant's window (exports, backfill_log, raw counts) and
records every tenant-day's raw checks on its partition, as a check-only run would.

Why a job of its own rather than check-only runs of the raw step: at a run's start Dagster
writes one planned row per check and partition, each holding the run's whole partition subset,
serialized row by row (dagster 1.13.27, `_store_asset_check_evaluation_planned`): a cost that
grows with the square of the run's days. Over 3 years × 4 domains in runs of 92 days that was
12.4 s of verify's 51 s of CPU, with ~0.55 s more per run (docs/benchmarks.md). This run
declares no check, so none is planned; its evaluations are the same rows the checks' own runs
store (checks/results.py), each on its partition, shown by the UI's partition health view. The
UI's "Execute checks" on some partitions still makes a check-only run of the raw step (same
code: raw_run.verify_days).
"""

# No `from __future__ import annotations`: Dagster reads the op's parameter types at definition
# time (its config class and context), and cannot resolve them from strings.
import datetime as dt

from dagster import (
    AssetCheckKey,
    AssetKey,
    Config,
    JobDefinition,
    OpExecutionContext,
    job,
    op,
)
from pydantic import Field

from atlas_dagster.checks.batch import CheckBatch
from atlas_dagster.checks.raw import RAW_CHECK_NAMES
from atlas_dagster.core.days import days_between
from atlas_dagster.domains import get_domain
from atlas_dagster.orchestration.raw_run import verify_days
from atlas_dagster.partitions import partition_key
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import Tenant, tenant_by_key

VERIFY_RAW_JOB = "verify_raw"


class VerifyRawConfig(Config):
    """Which tenant-days to verify."""

    tenant: str = Field(description="the tenant's key, organization_id.brand_id")
    first_day: str = Field(description="the window's first day, YYYY-MM-DD")
    last_day: str = Field(description="the window's last day, YYYY-MM-DD")
    domains: list[str] = Field(description="the raw domains to check, e.g. ['casino']")


def verify_raw_job(tenants: list[Tenant]) -> JobDefinition:
    @op(name="verify_raw_days", description=__doc__.splitlines()[0])
    def verify_raw_days(
        context: OpExecutionContext, config: VerifyRawConfig, clickhouse: ClickHouseResource
    ) -> None:
        tenant = tenant_by_key(tenants, config.tenant)
        domains = [get_domain(name) for name in config.domains]
        first = dt.date.fromisoformat(config.first_day)
        last = dt.date.fromisoformat(config.last_day)
        keys = [partition_key(day, tenant.key) for day in days_between(first, last)]
        check_keys = {
            AssetCheckKey(AssetKey(d.raw_table), name) for d in domains for name in RAW_CHECK_NAMES
        }
        checks = CheckBatch(context, clickhouse, check_keys=check_keys)
        try:
            verify_days(clickhouse, tenants, domains, keys, checks)
        finally:
            context.log.info(checks.stats.describe())

    @job(
        name=VERIFY_RAW_JOB,
        description="Re-reads a tenant's window and records each tenant-day's raw checks "
        "(log_completed, rows_reconcile, schema_conformance) on its partition; loads nothing.",
    )
    def verify_raw() -> None:
        verify_raw_days()

    return verify_raw
