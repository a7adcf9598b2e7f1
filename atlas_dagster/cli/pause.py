"""`atlas-dagster pause` / `resume`: stop and restart new INSERTs of running loads, no cancel.

Writes the pause flags orchestration/backpressure.py reads (the Dagster instance's key-value
store under DAGSTER_HOME): for every run, one run, or one backfill (its runs not yet started
too). A paused run lets its INSERTs in flight finish and starts no new one until resumed.
"""

from __future__ import annotations

import argparse
import getpass
import os
import socket

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from atlas_dagster.core.tags import BACKFILL_ID_TAG, CONCURRENCY_TAG
from atlas_dagster.orchestration.backpressure import PAUSE_PREFIX, pause_key, pauses, set_pause


def _scope(command: argparse.ArgumentParser) -> None:
    group = command.add_mutually_exclusive_group()
    group.add_argument("--run", dest="run_id", default="", help="one run id (default: all)")
    group.add_argument(
        "--backfill", dest="backfill_id", default="", help="one backfill id, its later runs too"
    )


def register(commands: argparse._SubParsersAction) -> None:
    pause = commands.add_parser(
        "pause", help="no new INSERT starts in running loads (in-flight ones finish); no cancel"
    )
    _scope(pause)
    pause.set_defaults(run=run_pause)
    resume = commands.add_parser("resume", help="lift a pause written by `atlas-dagster pause`")
    _scope(resume)
    resume.set_defaults(run=run_resume)


def _instance() -> DagsterInstance:
    home = os.environ.get("DAGSTER_HOME", "")
    if not home or not os.path.isdir(home):
        raise ValueError("DAGSTER_HOME must name the instance the backfill runs on")
    return DagsterInstance.get()


def _who() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


def run_pause(args: argparse.Namespace) -> int:
    key = pause_key(args.run_id or None, args.backfill_id or None)
    with _instance() as instance:
        set_pause(instance, key, True, _who())
    what = key[len(PAUSE_PREFIX) :]
    print(
        f"paused {what}: running loads start no new INSERT within a second (those in flight "
        "finish); `atlas-dagster resume` with the same scope goes on"
    )
    return 0


def run_resume(args: argparse.Namespace) -> int:
    key = pause_key(args.run_id or None, args.backfill_id or None)
    with _instance() as instance:
        was = pauses(instance, [key])
        set_pause(instance, key, False, _who())
    what = key[len(PAUSE_PREFIX) :]
    print(f"resumed {what}" if was else f"{what} was not paused (nothing to resume)")
    return 0


def running_loads(instance: DagsterInstance) -> list[dict[str, object]]:
    """Started runs that publish their INSERT concurrency, and whether a flag pauses them."""
    runs = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]))
    rows = []
    for run in runs:
        concurrency = run.tags.get(CONCURRENCY_TAG)
        if concurrency is None:
            continue
        keys = [pause_key(), pause_key(run_id=run.run_id)]
        backfill = run.tags.get(BACKFILL_ID_TAG)
        if backfill:
            keys.append(pause_key(backfill_id=backfill))
        paused = ", ".join(k[len(PAUSE_PREFIX) :] for k in sorted(pauses(instance, keys)))
        rows.append(
            {
                "run_id": run.run_id,
                "backfill": backfill or "",
                "insert_concurrency": concurrency,
                "paused_by": paused,
            }
        )
    return rows
