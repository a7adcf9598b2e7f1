"""A run's raw checks in batches: tenant-days wait here once settled (loaded, failed, or read for
verify), then a batch is read (one query for backfill_log, one for the raw counts) and its
evaluations stored (one transaction per database), each still on its own partition.

A batch goes when CHECK_BATCH_DAYS tenant-day-domains wait, when the first of them has waited
CHECK_BATCH_SECONDS, and at the end of the run, so that a run of large days still shows each
day's checks within seconds of its load.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from dagster import AssetCheckKey, AssetExecutionContext, AssetKey, OpExecutionContext

from atlas_dagster.checks.raw import CheckedDay, batch_outcomes
from atlas_dagster.checks.results import CheckOutcome, PartitionOutcome, report_outcomes
from atlas_dagster.partitions import partition_key
from atlas_dagster.resources.clickhouse import ClickHouseResource

# Tenant-day-domains read and stored together. A batch costs two engine queries, a target
# lookup per asset and two instance transactions whatever its size; the bound keeps one batch's
# evaluations to a few thousand rows.
CHECK_BATCH_DAYS = 512
# The longest a settled day waits for its checks while others keep loading. Its cost is per
# batch: a 40-day × 4-domain load of 2,500-row days made 5 batches in ~11 s at 2 s (2.8 s of
# wall on the run's reporting thread, 0.86 s of its CPU, mostly waiting for the engine and the
# instance that the loads kept busy; docs/benchmarks.md).
CHECK_BATCH_SECONDS = 5.0

# Told of each checked day whose checks did not all pass: (day, its outcomes).
OnFailed = Callable[[CheckedDay, list[CheckOutcome]], None]


@dataclass
class BatchStats:
    """What the run's checks cost, for its log: batches, days, evaluations, seconds."""

    batches: int = 0
    days: int = 0
    evaluations: int = 0
    read_seconds: float = 0.0
    store_seconds: float = 0.0
    cpu_seconds: float = 0.0  # the reporting thread's own, the engine's threads not counted

    def describe(self) -> str:
        return (
            f"checked {self.days} tenant-day-domain(s) in {self.batches} batch(es): read "
            f"{self.read_seconds:.2f}s, {self.evaluations} evaluation(s) stored in "
            f"{self.store_seconds:.2f}s, {self.cpu_seconds:.2f}s of this thread's CPU"
        )


class CheckBatch:
    """Collects settled tenant-days and checks them a batch at a time (one thread: the run's)."""

    def __init__(
        self,
        context: AssetExecutionContext | OpExecutionContext,
        clickhouse: ClickHouseResource,
        on_failed: OnFailed | None = None,
        check_keys: set[AssetCheckKey] | None = None,
    ) -> None:
        """`check_keys`: the checks to report (default: the step's selected ones)."""
        self.context = context
        self.clickhouse = clickhouse
        self.on_failed = on_failed
        self.check_keys = context.selected_asset_check_keys if check_keys is None else check_keys
        # Raw assets with a check to report: a day of another (a run without checks) waits for
        # nothing and is read by nothing.
        self._checked_assets = {key.asset_key for key in self.check_keys}
        self.stats = BatchStats()
        self._waiting: list[CheckedDay] = []
        self._first_waiting_since: float | None = None

    def add(self, checked: CheckedDay) -> None:
        if AssetKey(checked.domain.raw_table) not in self._checked_assets:
            return
        if not self._waiting:
            self._first_waiting_since = time.monotonic()
        self._waiting.append(checked)

    def due(self) -> bool:
        if not self._waiting:
            return False
        waited = time.monotonic() - (self._first_waiting_since or 0.0)
        return len(self._waiting) >= CHECK_BATCH_DAYS or waited >= CHECK_BATCH_SECONDS

    def flush_if_due(self) -> None:
        if self.due():
            self.flush()

    def flush(self) -> None:
        """Reads and reports every waiting day."""
        days, self._waiting = self._waiting, []
        if not days:
            return
        started, cpu = time.monotonic(), time.thread_time()
        with self.clickhouse.session() as client:
            checked = batch_outcomes(client, days)
        read = time.monotonic()
        reported: list[PartitionOutcome] = []
        for day, outcomes in checked:
            asset_key = AssetKey(day.domain.raw_table)
            key = partition_key(day.day, day.tenant.key)
            reported += [(asset_key, key, outcome) for outcome in outcomes]
            if self.on_failed is not None and not all(o.passed for o in outcomes):
                self.on_failed(day, outcomes)
        stored = report_outcomes(self.context, reported, self.check_keys)
        self.stats.batches += 1
        self.stats.days += len(days)
        self.stats.evaluations += stored
        self.stats.read_seconds += read - started
        self.stats.store_seconds += time.monotonic() - read
        self.stats.cpu_seconds += time.thread_time() - cpu
