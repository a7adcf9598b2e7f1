"""A relaunched raw run resumes its family: days an earlier attempt completed are not loaded again.

A run relaunched after a crash (Dagster's run retries, or a person's "re-execute from failure")
has a parent run; its family is its run group (same root run). A day whose
current backfill_log state is 'completed' by a run of the family is skipped; a day the dead run
was loading is 'failed' by then (the sweep) and loads again, as do the days it never started.
A skipped day with no materialization in the family gets one here: a run reports each day one
behind (raw_run.py), so the last day completed before a kill was never reported, and a backfill
counts a partition done only from a materialization.
"""

from __future__ import annotations

from collections.abc import Iterable

from clickhouse_connect.driver.client import Client
from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    DagsterEventType,
    DagsterInstance,
    DagsterRun,
    MetadataValue,
)

from atlas_dagster import sql
from atlas_dagster.orchestration.raw_work import RawWork
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import query_rows


def earlier_attempts(instance: DagsterInstance, run: DagsterRun) -> list[str]:
    """The other runs of the run's group when it re-executes one from its failure, as Dagster's
    run retries do (none for a first run; none for "re-execute all", which reloads)."""
    if run.parent_run_id is None or not run.is_resume_retry:
        return []
    group = instance.get_run_group(run.run_id)
    runs = group[1] if group is not None else []
    ids = {r.run_id for r in runs if r.run_id != run.run_id} | {run.parent_run_id}
    return sorted(ids)


def completed_by(client: Client, works: list[RawWork], run_ids: list[str]) -> dict[RawWork, str]:
    """The works whose day is 'completed' by one of `run_ids`, each with that run's id."""
    by_tenant: dict[str, list[RawWork]] = {}
    for work in works:
        by_tenant.setdefault(work.tenant.key, []).append(work)
    done: dict[RawWork, str] = {}
    for tenant_works in by_tenant.values():
        tenant = tenant_works[0].tenant
        index = {(w.domain.name, w.tenant_day.partition_date): w for w in tenant_works}
        parameters = {
            "organization_id": tenant.organization_id,
            "brand_id": tenant.brand_id,
            "domains": sorted({name for name, _ in index}),
            "dates": sorted({day for _, day in index}),
            "run_ids": run_ids,
        }
        for row in query_rows(client, sql.query("completed_by_runs"), parameters):
            work = index.get((row["domain"], row["partition_date"]))
            if work is not None:
                done[work] = row["run_id"]
    return done


def materialized_by(instance: DagsterInstance, run_ids: Iterable[str]) -> set[tuple[AssetKey, str]]:
    """The (asset, partition) pairs the runs reported materialized (read once per relaunch)."""
    found: set[tuple[AssetKey, str]] = set()
    for run_id in run_ids:
        for entry in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION):
            materialization = entry.asset_materialization
            if materialization is not None and materialization.partition is not None:
                found.add((materialization.asset_key, materialization.partition))
    return found


def resume(
    context: AssetExecutionContext, clickhouse: ClickHouseResource, works: list[RawWork]
) -> tuple[list[RawWork], list[AssetMaterialization]]:
    """The works still to load, and the materializations owed for the skipped days."""
    earlier = earlier_attempts(context.instance, context.run)
    if not earlier or not works:
        return works, []
    with clickhouse.session() as client:
        done = completed_by(client, works, earlier)
    if not done:
        return works, []
    reported = materialized_by(context.instance, earlier)
    owed = [
        AssetMaterialization(
            asset_key=work.asset_key,
            partition=work.partition_key,
            metadata={
                "loaded_by_run": MetadataValue.dagster_run(run_id),
                "resumed": MetadataValue.text(
                    "completed by an earlier attempt of this run, which stopped before reporting "
                    "it; not loaded again"
                ),
            },
        )
        for work, run_id in done.items()
        if (work.asset_key, work.partition_key) not in reported
    ]
    context.log.info(
        f"resuming after {', '.join(earlier)}: {len(done)} tenant-day(s) they completed are not "
        f"loaded again ({len(owed)} reported now, the rest were reported by them); "
        f"{len(works) - len(done)} left to load, newest first"
    )
    return [w for w in works if w not in done], owed
