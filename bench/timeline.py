"""A backfill's start: the instance's planned-events mode, and where the wait before its first
INSERT went (its first run's timeline)."""

from __future__ import annotations

# Dagster's per-partition planned events (its default) and the production switch, one per asset
# and run (README "Production instance").
PLANNED_EVENT_MODES = ("per-partition", "subset")


def planned_events_env(mode: str) -> dict[str, str]:
    """The switch as the processes creating runs (daemon, webserver) read it."""
    from atlas_dagster.dagster_internals import SUBSET_PLANNED_EVENTS_ENV

    return {SUBSET_PLANNED_EVENTS_ENV: "1" if mode == "subset" else ""}


def leader_timeline(instance, run_ids: list[str], created_at: float) -> dict[str, float]:
    """Seconds after the backfill's creation at which its first run was created, dequeued,
    started and began its step: where the wait before the first INSERT went."""
    from dagster import DagsterEventType

    runs = [r for r in (instance.get_run_record_by_id(i) for i in run_ids) if r is not None]
    if not runs:
        return {}
    first = min(runs, key=lambda r: r.create_timestamp.timestamp())
    marks = {"run_created": first.create_timestamp.timestamp()}
    wanted = {
        DagsterEventType.RUN_DEQUEUED: "run_dequeued",
        DagsterEventType.RUN_STARTING: "run_starting",
        DagsterEventType.RUN_START: "run_started",
        DagsterEventType.STEP_START: "step_started",
    }
    for entry in instance.all_logs(first.dagster_run.run_id):
        event = entry.dagster_event
        if event is not None and event.event_type in wanted:
            marks.setdefault(wanted[event.event_type], entry.timestamp)
    return {name: round(at - created_at, 1) for name, at in marks.items()}
