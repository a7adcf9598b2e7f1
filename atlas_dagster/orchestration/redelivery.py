"""The re-delivery sensor: for tenants with `reload_changed: true`, finds completed days whose
export changed since their load (checks/changes.py: listings only, never a file's contents) and
launches one raw run per tenant that reloads exactly those (SELECT_TAG 'changed'), newest first
within the insert pool like every raw run. Invariants: a tick stays inside Dagster's 60 s sensor
timeout (tenants scanned round-robin within SCAN_BUDGET_SECONDS, the cursor says who is next);
the same changes launch one run (run_key = digest of what changed), so a refused re-delivery is
not retried in a loop — it stays failed and listed until the client delivers again."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence

from dagster import (
    AssetKey,
    AssetSelection,
    DefaultSensorStatus,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from atlas_dagster.checks.changes import ChangedDay, scan_tenant
from atlas_dagster.core.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    SELECT_TAG,
    TENANT_TAG,
)
from atlas_dagster.domains import DOMAINS
from atlas_dagster.orchestration.selection import Selection
from atlas_dagster.orchestration.sensors import brief_engine
from atlas_dagster.partitions import partition_key
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.embedded_engine import EngineBusyError
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.tenants import Tenant

SENSOR_NAME = "reload_changed_exports"
# Scanning stops starting tenants after this long, so a tick ends well inside Dagster's 60 s
# evaluation timeout; the rest are scanned on the next ticks. A 3-year tenant's scan took 0.54 s
# on local files here (bench/bench_changes.py), so a tick covers dozens of tenants.
SCAN_BUDGET_SECONDS = 40.0


def reload_request(tenant: Tenant, changed: Sequence[ChangedDay]) -> RunRequest:
    """One ranged run over the tenant's changed days' span and domains; the run reloads only the
    changed days of it (SELECT_TAG), the others in the span are left as they are."""
    days = [c.partition_date for c in changed]
    domains = sorted({c.domain for c in changed})
    digest = hashlib.sha256(
        "\n".join(f"{c.domain} {c.partition_date} {c.reason}" for c in changed).encode()
    ).hexdigest()[:16]
    return RunRequest(
        run_key=f"reload-changed:{tenant.key}:{digest}",
        asset_selection=[AssetKey(DOMAINS[name].raw_table) for name in domains],
        tags={
            ASSET_PARTITION_RANGE_START_TAG: partition_key(min(days), tenant.key),
            ASSET_PARTITION_RANGE_END_TAG: partition_key(max(days), tenant.key),
            SELECT_TAG: str(Selection.CHANGED),
            TENANT_TAG: tenant.key,
        },
    )


def redelivery_sensor(tenants: Sequence[Tenant], interval_seconds: int) -> SensorDefinition:
    """Every `interval_seconds` (ATLAS_REDELIVERY_SECONDS), the watched tenants' changed days."""
    watched = [t for t in tenants if t.reload_changed]
    raw_tables = sorted({DOMAINS[d].raw_table for t in tenants for d in t.domains})

    @sensor(
        name=SENSOR_NAME,
        minimum_interval_seconds=interval_seconds,
        asset_selection=AssetSelection.assets(*raw_tables),
        default_status=DefaultSensorStatus.RUNNING,
        description=(
            "For tenants with reload_changed: true, lists their exports and reloads the "
            "completed days whose files changed since their load (--only-changed)."
        ),
    )
    def reload_changed_exports(
        context: SensorEvaluationContext, clickhouse: ClickHouseResource
    ) -> SensorResult | SkipReason:
        if not watched:
            return SkipReason("no tenant sets reload_changed: true")
        return _tick(context, clickhouse, watched)

    return reload_changed_exports


def _tick(
    context: SensorEvaluationContext, clickhouse: ClickHouseResource, watched: list[Tenant]
) -> SensorResult | SkipReason:
    first = int(context.cursor or 0) % len(watched)
    deadline = time.monotonic() + SCAN_BUDGET_SECONDS
    requests, scanned, unlisted = [], 0, []
    try:
        with brief_engine(clickhouse).session() as client:
            ensure_schema(client)
            while scanned < len(watched) and time.monotonic() < deadline:
                tenant = watched[(first + scanned) % len(watched)]
                domains = list(tenant.domains)
                scan = scan_tenant(client, tenant, domains, tenant.start_date, tenant.last_date())
                scanned += 1
                unlisted += scan.unlisted
                if scan.changed:
                    requests.append(reload_request(tenant, scan.changed))
                    context.log.info(
                        f"{tenant.key}: {len(scan.changed)} day(s) changed since loaded, "
                        f"e.g. {scan.changed[0].partition_date} {scan.changed[0].domain}: "
                        f"{scan.changed[0].reason}"
                    )
    except EngineBusyError as exc:
        return SkipReason(f"{exc}; scanning on the next tick")
    for line in unlisted:
        context.log.warning(f"could not list: {line}")
    cursor = str((first + scanned) % len(watched))
    summary = f"scanned {scanned} of {len(watched)} tenant(s), {len(requests)} to reload"
    if not requests:
        return SensorResult(skip_reason=summary, cursor=cursor)
    context.log.info(summary)
    return SensorResult(run_requests=requests, cursor=cursor)
