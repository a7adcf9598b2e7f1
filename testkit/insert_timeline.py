"""Reads back a run's timeline: its events' times, and when each tenant-day's INSERT ran."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dagster import AssetKey, DagsterEventType, DagsterInstance

from atlas_dagster.domains import DOMAINS


@dataclass(frozen=True)
class InsertInterval:
    asset_key: str
    partition_key: str
    run_id: str
    started_at: float
    finished_at: float
    insert_seconds: float
    rows_loaded: int
    phases: dict[str, Any] = field(default_factory=dict)  # the load_phases metadata
    dispatched_at: float | None = None  # when the run's scheduler handed the day to a worker
    settled_at: float | None = None  # when the run's scheduler counted the day done


def insert_intervals(instance: DagsterInstance, run_ids: Iterable[str]) -> list[InsertInterval]:
    """Every raw materialization of these runs, oldest INSERT start first."""
    raw_keys = {AssetKey(d.raw_table) for d in DOMAINS.values()}
    intervals = []
    for run_id in run_ids:
        cursor = None
        while True:
            page = instance.get_records_for_run(
                run_id, cursor=cursor, of_type=DagsterEventType.ASSET_MATERIALIZATION, limit=1000
            )
            for record in page.records:
                materialization = record.asset_materialization
                if materialization is None or materialization.asset_key not in raw_keys:
                    continue
                metadata = materialization.metadata
                intervals.append(
                    InsertInterval(
                        materialization.asset_key.to_user_string(),
                        materialization.partition or "",
                        run_id,
                        float(metadata["insert_started_at"].value),
                        float(metadata["insert_finished_at"].value),
                        float(metadata["insert_seconds"].value),
                        int(metadata["rows_loaded"].value),
                        metadata["load_phases"].value if "load_phases" in metadata else {},
                        _optional_time(metadata, "dispatched_at"),
                        _optional_time(metadata, "settled_at"),
                    )
                )
            if not page.has_more:
                break
            cursor = page.cursor
    return sorted(intervals, key=lambda i: i.started_at)


def _optional_time(metadata, name: str) -> float | None:
    return float(metadata[name].value) if name in metadata else None


def first_event_times(
    instance: DagsterInstance, run_id: str, event_types: Iterable[DagsterEventType]
) -> dict[str, float]:
    """Unix time of the first event of each of these types in the run, by type name."""
    first: dict[str, float] = {}
    records = instance.get_records_for_run(run_id, of_type=set(event_types), limit=1000).records
    for record in records:
        entry = record.event_log_entry
        first.setdefault(entry.dagster_event.event_type.name, entry.timestamp)
    return first


def max_overlap(intervals: Iterable[InsertInterval]) -> int:
    """The most INSERTs in progress at one moment (an end at t frees its slot before a start)."""
    edges = sorted(
        [(i.started_at, 1) for i in intervals] + [(i.finished_at, -1) for i in intervals],
        key=lambda edge: (edge[0], edge[1]),
    )
    peak = current = 0
    for _, delta in edges:
        current += delta
        peak = max(peak, current)
    return peak
