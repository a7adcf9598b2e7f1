"""Declarative automation of gold after raw: tenant-aware, over every day, not only the latest."""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Mapping, Sequence

from dagster import (
    AssetKey,
    AssetSelection,
    AutomationCondition,
    AutomationConditionSensorDefinition,
    AutomationContext,
    AutomationResult,
    BetaWarning,
    DefaultSensorStatus,
)

from atlas_dagster.domains import DOMAINS
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.partitions import split_key
from atlas_dagster.scope import in_scope
from atlas_dagster.tenants import Tenant

GOLD_SENSOR_NAME = "gold_after_raw"


class InTenantScope(AutomationCondition):
    """Partitions whose tenant lists one of the asset's domains and whose day is in its window.

    A leaf condition evaluated on gold assets and, through any_deps_match, on their raw deps:
    raw days outside this scope are never loaded, so they must neither block gold nor be awaited.
    """

    def __init__(
        self, tenants: Sequence[Tenant], domains_by_key: Mapping[AssetKey, tuple[str, ...]]
    ) -> None:
        self._tenants = {tenant.key: tenant for tenant in tenants}
        self._domains_by_key = dict(domains_by_key)

    @property
    def name(self) -> str:
        return "in_tenant_scope"

    @property
    def description(self) -> str:
        return "The tenant lists one of the asset's domains and its window covers the day"

    @property
    def requires_cursor(self) -> bool:
        return False

    def _covers(self, partition_key: str, domains: tuple[str, ...], today: dt.date) -> bool:
        day, tenant_key = split_key(partition_key)
        tenant = self._tenants.get(tenant_key)
        return tenant is not None and in_scope(tenant, domains, day, today)

    def evaluate(self, context: AutomationContext) -> AutomationResult:
        candidates = context.candidate_subset
        domains = self._domains_by_key.get(context.key)
        # An asset outside the registry counts as in scope: a missing dep then blocks gold.
        if candidates.is_empty or not candidates.is_partitioned or domains is None:
            return AutomationResult(context, candidates)
        today = context.evaluation_time.date()
        keys = {
            key
            for key in candidates.expensively_compute_partition_keys()
            if self._covers(key, domains, today)
        }
        subset = context.asset_graph_view.get_subset_from_partition_keys(
            key=context.key, partitions_def=candidates.partitions_def, partition_keys=keys
        )
        return AutomationResult(context, subset)


class TenantRawIdle(AutomationCondition):
    """Partitions whose tenant has no raw day in progress (a run planned it, not yet landed).

    Used in embedded mode only: there gold replays would share the one engine and the cores
    with the tenant's raw INSERTs (measured on a 30-day × 4-domain backfill: 310 s of loading
    with gold interleaved against 168 s without), so a tenant's gold waits for its raw run.
    Against a server, gold fills in day by day while the backfill goes on.
    """

    @property
    def name(self) -> str:
        return "tenant_raw_idle"

    @property
    def description(self) -> str:
        return "No raw day of the partition's tenant is being loaded"

    @property
    def requires_cursor(self) -> bool:
        return False

    async def evaluate(self, context: AutomationContext) -> AutomationResult:  # type: ignore[override]
        candidates = context.candidate_subset
        if candidates.is_empty or not candidates.is_partitioned:
            return AutomationResult(context, candidates)
        view = context.asset_graph_view
        loading: set[str] = set()
        for domain in DOMAINS.values():
            raw_key = AssetKey(domain.raw_table)
            in_progress = await view.compute_run_in_progress_subset(
                key=raw_key, from_subset=view.get_full_subset(key=raw_key)
            )
            loading |= {split_key(k)[1] for k in in_progress.expensively_compute_partition_keys()}
        keys = {
            key
            for key in candidates.expensively_compute_partition_keys()
            if split_key(key)[1] not in loading
        }
        subset = view.get_subset_from_partition_keys(
            key=context.key, partitions_def=candidates.partitions_def, partition_keys=keys
        )
        return AutomationResult(context, subset)


def domains_by_asset_key() -> dict[AssetKey, tuple[str, ...]]:
    """Raw assets hold one domain; gold assets are made from their sources."""
    raw = {AssetKey(domain.raw_table): (domain.name,) for domain in DOMAINS.values()}
    gold = {AssetKey(table.name): table.sources for table in GOLD_TABLES.values()}
    return raw | gold


def gold_automation_condition(
    tenants: Sequence[Tenant], embedded: bool = False
) -> AutomationCondition:
    """Like eager(), minus its latest-window limit and first-tick reset, with tenant-aware deps.

    - pending: the partition became missing (on the first evaluation every missing partition
      counts as newly missing) or a dep was updated, and it has not been requested or
      materialized since. Unlike since_last_handled(), the reset leaves out
      initial_evaluation(): history whose raw landed before the sensor first ran is requested.
    - ready: no in-scope dep partition is missing (for the liability, every in-scope raw day of
      its window) and none is in progress, so a newest-first load of a window requests each
      liability day once, when its oldest raw day lands.
    - embedded only: the tenant has no raw day in progress (see TenantRawIdle).
    """
    scope = InTenantScope(tenants, domains_by_asset_key())
    handled = (
        AutomationCondition.newly_requested() | AutomationCondition.newly_updated()
    ).with_label("requested or updated")
    pending = (
        (AutomationCondition.newly_missing() | AutomationCondition.any_deps_updated())
        .since(handled)
        .with_label("missing or deps updated since requested or updated")
    )
    deps_missing = AutomationCondition.any_deps_match(
        AutomationCondition.missing() & scope
    ).with_label("any in-scope deps missing")
    condition = (
        scope
        & pending
        & ~deps_missing
        & ~AutomationCondition.any_deps_in_progress()
        & ~AutomationCondition.in_progress()
    )
    if embedded:
        condition = condition & TenantRawIdle()
    return condition.with_label("gold after raw")


def gold_automation_sensor() -> AutomationConditionSensorDefinition:
    with warnings.catch_warnings():
        # use_user_code_server is beta, and required: InTenantScope is not a serializable
        # builtin, so only the code server (not the daemon) can evaluate it.
        warnings.simplefilter("ignore", BetaWarning)
        return AutomationConditionSensorDefinition(
            GOLD_SENSOR_NAME,
            target=AssetSelection.assets(*GOLD_TABLES),
            default_status=DefaultSensorStatus.RUNNING,
            use_user_code_server=True,
            description="Replays the gold tenant-days whose raw partitions landed or changed.",
        )
