"""When a tenant-day's failed try goes again: bounded tries, exponential backoff with jitter, and
the resolution of an INSERT whose connection dropped, before it is tried again.

Invariants: only a transient fault (loading/faults.py) is retried, never past
ATLAS_RETRY_ATTEMPTS tries; a retried day is cleared before its next INSERT (the caller marks it
as holding rows); against a server, a day whose INSERT may still be running there is not tried
again until that INSERT is known stopped (killed, or ended by itself), so two INSERTs of one day
never run at once. The wait itself is LoadScheduler's: the day waits among the pending ones.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from atlas_dagster import sql
from atlas_dagster.loading.faults import Fault
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import run_command
from atlas_dagster.settings import LoadSettings

# How long the resolution of an uncertain INSERT waits for the server to stop it (KILL ... SYNC
# returns once it has; this bounds a server that keeps answering 'still running').
RESOLVE_WAIT_SECONDS = 120.0
RESOLVE_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int
    base_seconds: float
    max_seconds: float

    @classmethod
    def from_settings(cls, settings: LoadSettings) -> RetryPolicy:
        """The run's policy, from its tunables (the resource atlas_settings)."""
        return cls(settings.retry_attempts, settings.retry_base_seconds, settings.retry_max_seconds)

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """The wait after try `attempt` (1-based): base × 2^(attempt-1), capped, then "equal
        jitter" (between half and all of it), so that days failed together do not come back
        together yet each still waits at least half its step."""
        step = min(self.max_seconds, self.base_seconds * 2 ** (attempt - 1))
        return step / 2 + (rng or random).uniform(0, step / 2)

    def next_try(self, fault: Fault, attempt: int) -> float | None:
        """Seconds until the next try, or None when the failure is final."""
        if not fault.transient or attempt >= self.attempts:
            return None
        return self.delay(attempt)


class UnresolvedInsert(RuntimeError):
    """An INSERT whose connection dropped still runs on the server after the bounded wait."""


def resolve_uncertain(
    clickhouse: ClickHouseResource, query_id: str, canceled: threading.Event
) -> str:
    """Stops an INSERT that may still run on the server, and says how it ended there.

    Embedded chDB never gets here with a live INSERT: the statement runs in this process and
    has ended (with its error) when the call returns. Against a server: while the query_id is in
    system.processes, KILL QUERY ... SYNC; then system.query_log (flushed) says whether it
    finished. Either way the next try clears the day before its INSERT, so a finished INSERT's
    rows are replaced, never added to. Raises (a transient error, retried) when the server
    cannot be asked yet."""
    if clickhouse.is_embedded():
        return "embedded: the INSERT ran in this process and ended with its error"
    parameters = {"query_id": query_id}
    deadline = time.monotonic() + RESOLVE_WAIT_SECONDS
    with clickhouse.session() as client:
        killed = False
        while int(run_command(client, sql.query("query_running"), parameters) or 0):
            if time.monotonic() > deadline:
                raise UnresolvedInsert(
                    f"INSERT {query_id} still runs on the server after "
                    f"{RESOLVE_WAIT_SECONDS:.0f}s of KILL QUERY"
                )
            # KILL ... SYNC returns once the server stopped it: wait only if it is still listed.
            if killed and canceled.wait(RESOLVE_POLL_SECONDS):
                break
            run_command(client, sql.query("kill_query_sync"), parameters)
            killed = True
        client.command(sql.query("flush_logs"))
        outcome = str(run_command(client, sql.query("query_outcome"), parameters) or "")
    ended = {
        "QueryFinish": "it had finished: its rows are cleared before the next try",
        "ExceptionWhileProcessing": "it had failed on the server",
        "ExceptionBeforeStart": "it never started on the server",
        "": "the server has no record of it: it never ran",
    }.get(outcome, outcome)
    return f"INSERT {query_id} {'killed, ' if killed else ''}{ended}"
