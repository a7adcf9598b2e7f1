"""Gold automation: a cursor over new raw materializations, readiness checked only where they land.

Invariants: a gold tenant-day is requested once per raw change that reaches it (a landing or a
re-load of any in-scope raw day it reads), once every in-scope raw day it reads is materialized,
nothing it reads is loading and no gold run for it is queued or running; over all history, not
only the latest days. A tick costs the raw events since the previous tick and the tenant-days
still waiting, never the number of partitions. Why not stock conditions, and when they could take
over again: docs/architecture.md, "Design record".
"""

from __future__ import annotations

import datetime as dt
import json
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    AssetSelection,
    AutomationCondition,
    AutomationConditionSensorDefinition,
    AutomationContext,
    AutomationResult,
    BetaWarning,
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    MetadataValue,
    RunsFilter,
)

from atlas_dagster.core.days import days_between
from atlas_dagster.domains import DOMAINS
from atlas_dagster.gold.tables import GOLD_TABLES, GoldTable
from atlas_dagster.partitions import TenantDay, is_tenant_day_key, run_partition_bounds, split_key
from atlas_dagster.scope import in_scope
from atlas_dagster.tenants import Tenant

GOLD_SENSOR_NAME = "gold_after_raw"
RAW_KEYS_BY_DOMAIN = {name: AssetKey(domain.raw_table) for name, domain in DOMAINS.items()}
# A tick reads at most this many new materializations per raw asset and leaves the rest to the
# next ticks, so a first evaluation over years of landed history (or a burst) stays bounded.
MAX_EVENTS_PER_TICK = 20_000
# Records per storage query: Dagster refuses more than 10,000 at a time.
PAGE = 5_000
# Partition keys bound in one storage query (SQLite's default host-parameter limit is 999+).
KEYS_PER_QUERY = 500
IN_PROGRESS = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]


@dataclass
class Pending:
    """A gold asset's node cursor: where it stopped reading raw, and the tenant-days waiting.

    days[tenant][iso day] is the storage id of the newest raw event that reached that gold day
    (a gold materialization after it means the day was refreshed since, so it is not requested).
    waiting holds tenants whose days wait on a run (re-checked each tick); days that wait on
    missing raw are re-checked only when that tenant's raw changes.
    """

    after: dict[str, int] = field(default_factory=dict)
    days: dict[str, dict[str, int]] = field(default_factory=dict)
    waiting: set[str] = field(default_factory=set)

    @classmethod
    def parse(cls, text: str | None) -> Pending:
        if not text:
            return cls()
        data = json.loads(text)
        return cls(data["after"], data["days"], set(data["waiting"]))

    def dump(self) -> str:
        days = {tenant: days for tenant, days in self.days.items() if days}
        waiting = sorted(self.waiting & set(days))
        return json.dumps({"after": self.after, "days": days, "waiting": waiting})

    def add(self, tenant: str, day: dt.date, storage_id: int) -> None:
        days = self.days.setdefault(tenant, {})
        days[day.isoformat()] = max(storage_id, days.get(day.isoformat(), 0))

    def count(self) -> int:
        return sum(len(days) for days in self.days.values())


@dataclass(frozen=True)
class RawEvent:
    domain: str
    tenant: str
    day: dt.date
    storage_id: int
    timestamp: float


@dataclass(frozen=True)
class Latest:
    """The newest materialization of one partition."""

    storage_id: int
    timestamp: float


@dataclass(frozen=True)
class RunBox:
    """An in-progress run: its assets and the tenant-days its partition range spans."""

    created: float
    assets: frozenset[AssetKey]
    first: dt.date
    last: dt.date
    tenants: frozenset[str]

    def covers(self, key: AssetKey, tenant: str, day: dt.date) -> bool:
        return key in self.assets and tenant in self.tenants and self.first <= day <= self.last


class EventLogSnapshot:
    """The event log up to one storage id, read once per evaluation and shared by the gold assets.

    Raw reads and latest-materialization look-ups are cached for the snapshot, so four gold
    assets reading the same raw events cost one read (a whole year landing in one tick, 100
    tenants, same loaded machine: 10.2 s with a read per gold asset, 4.8 s shared).
    """

    def __init__(self, instance: DagsterInstance, upto: int | None, tenant_order: Sequence[str]):
        self.instance, self.upto, self._order = instance, upto, tenant_order
        self._events: dict[tuple[str, int | None], tuple[list[RawEvent], int | None]] = {}
        self._latest: dict[AssetKey, dict[str, Latest | None]] = {}
        self._runs: list[RunBox] | None = None

    def _before(self) -> int | None:
        return None if self.upto is None else self.upto + 1

    def new_raw_events(self, domain: str, after: int | None) -> tuple[list[RawEvent], int | None]:
        """Materializations of the domain's raw asset after `after`, and where the next read
        starts (at most MAX_EVENTS_PER_TICK of them: a burst spreads over ticks)."""
        if (domain, after) not in self._events:
            self._events[(domain, after)] = self._read(domain, after)
        return self._events[(domain, after)]

    def _read(self, domain: str, after: int | None) -> tuple[list[RawEvent], int | None]:
        key = RAW_KEYS_BY_DOMAIN[domain]
        events: list[RawEvent] = []
        complete = False
        for _ in range(MAX_EVENTS_PER_TICK // PAGE):
            result = self.instance.fetch_materializations(
                AssetRecordsFilter(
                    asset_key=key, after_storage_id=after, before_storage_id=self._before()
                ),
                limit=PAGE,
                ascending=True,
            )
            for record in result.records:
                after = max(record.storage_id, after or 0)
                if record.partition_key:
                    day, tenant = split_key(record.partition_key)
                    events.append(
                        RawEvent(domain, tenant, day, record.storage_id, record.timestamp)
                    )
            if not result.has_more:
                complete = True
                break
        if complete:
            # Read through to the snapshot: these are the newest events of their partitions.
            latest = self._latest.setdefault(key, {})
            for event in events:
                latest[TenantDay(event.day, event.tenant).partition_key] = Latest(
                    event.storage_id, event.timestamp
                )
        return events, after

    def latest(self, key: AssetKey, partition_keys: Iterable[str]) -> dict[str, Latest]:
        """The newest materialization in the snapshot of each of these partitions that has one."""
        keys = set(partition_keys)
        known = self._latest.setdefault(key, {})
        wanted = sorted(keys - set(known))
        for start in range(0, len(wanted), KEYS_PER_QUERY):
            chunk = wanted[start : start + KEYS_PER_QUERY]
            known.update(dict.fromkeys(chunk))
            cursor = None
            while True:
                result = self.instance.fetch_materializations(
                    AssetRecordsFilter(
                        asset_key=key, asset_partitions=chunk, before_storage_id=self._before()
                    ),
                    limit=PAGE,
                    cursor=cursor,
                )
                for record in result.records:  # newest first
                    if record.partition_key and known.get(record.partition_key) is None:
                        known[record.partition_key] = Latest(record.storage_id, record.timestamp)
                if not result.has_more:
                    break
                cursor = result.cursor
        return {k: v for k in keys if (v := known.get(k)) is not None}

    def runs(self) -> list[RunBox]:
        if self._runs is None:
            self._runs = in_progress_runs(self.instance, self._order)
        return self._runs


_shared: EventLogSnapshot | None = None


def snapshot(
    instance: DagsterInstance, upto: int | None, tenant_order: Sequence[str]
) -> EventLogSnapshot:
    """The evaluation's snapshot: the gold assets of one tick share it (same instance, same
    storage id); a new tick, or no storage id to pin, starts a new one."""
    global _shared
    same = _shared is not None and _shared.instance is instance and _shared.upto == upto
    if not same or upto is None:
        _shared = EventLogSnapshot(instance, upto, tenant_order)
    assert _shared is not None
    return _shared


def in_progress_runs(instance: DagsterInstance, tenant_order: Sequence[str]) -> list[RunBox]:
    """Queued or running asset runs. A range of date|tenant keys spans the box of its dates and
    the tenants between its ends in the partitions' order (Dagster's multi-partition range)."""
    boxes: list[RunBox] = []
    position = {tenant: i for i, tenant in enumerate(tenant_order)}
    for record in instance.get_run_records(RunsFilter(statuses=IN_PROGRESS)):
        run = record.dagster_run
        bounds = run_partition_bounds(run.tags)
        if not run.asset_selection or bounds is None or not is_tenant_day_key(bounds[0]):
            continue
        (first, first_tenant), (last, last_tenant) = split_key(bounds[0]), split_key(bounds[1])
        low, high = sorted((position.get(first_tenant, -1), position.get(last_tenant, -1)))
        tenants = {first_tenant, last_tenant} | set(tenant_order[max(low, 0) : high + 1])
        boxes.append(
            RunBox(
                record.create_timestamp.timestamp(),
                frozenset(run.asset_selection),
                first,
                last,
                frozenset(tenants),
            )
        )
    return boxes


class GoldAfterRaw(AutomationCondition):
    """One gold asset's tenant-days whose raw landed or changed and are ready to replay.

    A leaf with its own cursor (Pending): each evaluation reads only the raw materializations
    stored since the previous one, adds the gold days they reach (the day itself; for a windowed
    table every day whose lookback window holds it), and checks readiness of the waiting days of
    the tenants concerned, with a few indexed storage queries:
    - every in-scope raw day it reads is materialized (only the tenant's listed domains, only
      days inside the tenant's window): a newest-first load requests each liability day once,
      when the oldest raw day of its window lands;
    - nothing it reads is loading (a queued or running raw run spans it and nothing landed it
      since the run was created): against a server gold fills in day by day during a backfill;
      in embedded mode the tenant has no raw run at all in progress, because gold replays would
      share the one engine and the cores with its raw INSERTs (measured on a 30-day x 4-domain
      backfill: 310 s of loading with gold interleaved against 168 s without);
    - no gold run for the day is queued or running (it stays pending and is re-checked after).
    A gold materialization newer than the raw change means the day was refreshed since: it is
    dropped without a request. The first evaluation reads all history (MAX_EVENTS_PER_TICK per
    raw asset a tick), so raw that landed before the sensor ever ran is requested too.
    """

    def __init__(
        self,
        table: GoldTable,
        tenants: Sequence[Tenant],
        lookback_days: int,
        embedded: bool,
    ) -> None:
        self._table = table
        self._tenants = {tenant.key: tenant for tenant in tenants}
        self._order = [tenant.key for tenant in tenants]
        self._reach = lookback_days if table.windowed else 1
        self._embedded = embedded

    @property
    def name(self) -> str:
        return "raw_landed_and_ready"

    @property
    def description(self) -> str:
        how = "the tenant's raw run is over" if self._embedded else "none of it is loading"
        window = f" (its {self._reach}-day window)" if self._reach > 1 else ""
        return (
            f"Raw changed since the last request, every in-scope raw day read{window} has "
            f"landed, {how} and no gold run for the day is in progress"
        )

    @property
    def requires_cursor(self) -> bool:
        return True

    def _sources(self, tenant: Tenant) -> tuple[str, ...]:
        return tuple(d for d in self._table.sources if d in tenant.domains)

    def _reached_days(self, event: RawEvent, today: dt.date) -> list[dt.date]:
        tenant = self._tenants.get(event.tenant)
        if tenant is None or event.domain not in self._sources(tenant):
            return []
        days = (event.day + dt.timedelta(days=n) for n in range(self._reach))
        return [day for day in days if in_scope(tenant, self._table.sources, day, today)]

    def _reads(self, tenant: Tenant, day: dt.date) -> list[tuple[str, str]]:
        """(domain, raw partition key) of every in-scope raw day the gold day reads."""
        first = max(day - dt.timedelta(days=self._reach - 1), tenant.start_date)
        days = days_between(first, day)
        return [
            (domain, TenantDay(d, tenant.key).partition_key)
            for domain in self._sources(tenant)
            for d in days
        ]

    def _ready(
        self, log: EventLogSnapshot, candidates: list[tuple[str, dt.date, int]]
    ) -> tuple[list[tuple[str, dt.date]], list[tuple[str, dt.date]], set[str]]:
        """(to request, refreshed since: drop, tenants waiting on a run) among the candidates."""
        boxes: dict[str, list[RunBox]] = {}
        for box in log.runs():
            for tenant in box.tenants:
                boxes.setdefault(tenant, []).append(box)
        raw_keys = set(RAW_KEYS_BY_DOMAIN.values())
        # Embedded: a tenant with a raw run in progress waits, with no look-up at all (during a
        # fleet backfill that is most tenants, every tick).
        busy = {
            tenant
            for tenant, runs in boxes.items()
            if self._embedded and any(box.assets & raw_keys for box in runs)
        }
        waiting = {t for t, _, _ in candidates if t in busy}
        candidates = [c for c in candidates if c[0] not in busy]
        reads = {(t, d): self._reads(self._tenants[t], d) for t, d, _ in candidates}
        keys_by_domain: dict[str, set[str]] = {}
        for pairs in reads.values():
            for domain, key in pairs:
                keys_by_domain.setdefault(domain, set()).add(key)
        raw = {
            domain: log.latest(RAW_KEYS_BY_DOMAIN[domain], keys)
            for domain, keys in keys_by_domain.items()
        }
        gold_key = AssetKey(self._table.name)
        gold = log.latest(gold_key, [TenantDay(d, t).partition_key for t, d, _ in candidates])

        def loading(domain: str, key: str) -> bool:
            """A run in progress spans the raw day and has not landed it (nothing newer)."""
            day, tenant = split_key(key)
            raw_key, landed = RAW_KEYS_BY_DOMAIN[domain], raw[domain].get(key)
            return any(
                box.covers(raw_key, tenant, day)
                and (landed is None or landed.timestamp < box.created)
                for box in boxes.get(tenant, ())
            )

        request, drop = [], []
        for tenant, day, trigger in candidates:
            refreshed = gold.get(TenantDay(day, tenant).partition_key)
            if refreshed is not None and refreshed.storage_id > trigger:
                drop.append((tenant, day))
            elif any(key not in raw[domain] for domain, key in reads[(tenant, day)]):
                continue  # waits for raw: re-checked when the tenant's raw changes
            elif any(box.covers(gold_key, tenant, day) for box in boxes.get(tenant, ())) or any(
                loading(domain, key) for domain, key in reads[(tenant, day)]
            ):
                waiting.add(tenant)
            else:
                request.append((tenant, day))
        return request, drop, waiting

    def evaluate(self, context: AutomationContext) -> AutomationResult:
        candidates_subset = context.candidate_subset
        if candidates_subset.is_empty or not candidates_subset.is_partitioned:
            return AutomationResult(context, candidates_subset, cursor=context.cursor)
        view = context.asset_graph_view
        today = context.evaluation_time.date()
        pending = Pending.parse(context.cursor)
        # One snapshot of the event log for the whole evaluation: a raw day that lands while it
        # runs is neither half-seen nor seen twice (once as ready, once more as new next tick).
        log = snapshot(view.instance, view.last_event_id, self._order)
        events: list[RawEvent] = []
        for domain in self._table.sources:
            new, after = log.new_raw_events(domain, pending.after.get(domain))
            events += new
            if after is not None:
                pending.after[domain] = after
        changed = set()
        for event in events:
            for day in self._reached_days(event, today):
                pending.add(event.tenant, day, event.storage_id)
                changed.add(event.tenant)
        recheck = (changed | pending.waiting) & set(pending.days) & set(self._tenants)
        candidates = [
            (tenant, dt.date.fromisoformat(day), trigger)
            for tenant in sorted(recheck)
            for day, trigger in pending.days[tenant].items()
        ]
        request, drop, waiting = [], [], set()
        if candidates:
            request, drop, waiting = self._ready(log, candidates)
        for tenant, day in (*request, *drop):
            del pending.days[tenant][day.isoformat()]
        pending.waiting = (pending.waiting - recheck) | waiting
        keys = {TenantDay(day, tenant).partition_key for tenant, day in request}
        subset = view.get_subset_from_partition_keys(
            key=context.key, partitions_def=candidates_subset.partitions_def, partition_keys=keys
        )
        metadata = {
            "raw_events_read": MetadataValue.int(len(events)),
            "tenant_days_checked": MetadataValue.int(len(candidates)),
            "tenant_days_pending": MetadataValue.int(pending.count()),
            "tenants_waiting_on_runs": MetadataValue.int(len(pending.waiting)),
        }
        true_subset = candidates_subset.compute_intersection(subset)
        return AutomationResult(context, true_subset, cursor=pending.dump(), metadata=metadata)


def gold_automation_condition(
    table: GoldTable, tenants: Sequence[Tenant], lookback_days: int, embedded: bool = False
) -> AutomationCondition:
    """The gold asset's condition: requested when its raw landed and is ready (GoldAfterRaw)."""
    return GoldAfterRaw(table, tenants, lookback_days, embedded)


def gold_automation_sensor(interval_seconds: int) -> AutomationConditionSensorDefinition:
    """The sensor evaluating gold's conditions every `interval_seconds`
    (ATLAS_AUTOMATION_SECONDS)."""
    with warnings.catch_warnings():
        # use_user_code_server is beta, and required: GoldAfterRaw is not a serializable
        # builtin, so only the code server (not the daemon) can evaluate it.
        warnings.simplefilter("ignore", BetaWarning)
        return AutomationConditionSensorDefinition(
            GOLD_SENSOR_NAME,
            target=AssetSelection.assets(*GOLD_TABLES),
            default_status=DefaultSensorStatus.RUNNING,
            use_user_code_server=True,
            minimum_interval_seconds=interval_seconds,
            description="Replays the gold tenant-days whose raw partitions landed or changed.",
        )
