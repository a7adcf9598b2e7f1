"""The running Dagster webserver's GraphQL API, as the UI uses it: launch, follow, cancel."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from functools import cache
from pathlib import Path
from typing import Any

from atlas_dagster.core.tags import BACKFILL_ID_TAG, TIME_LEFT_TAG
from atlas_dagster.settings import current_settings

GRAPHQL_DIR = Path(__file__).parent / "graphql"
FINISHED_BACKFILL_STATUSES = {
    "COMPLETED",
    "COMPLETED_SUCCESS",
    "COMPLETED_FAILED",
    "FAILED",
    "CANCELED",
}


class DagsterApiError(RuntimeError):
    """The webserver is unreachable or refused the request; the message says which."""


class WebserverUnreachable(DagsterApiError):
    """No answer from the webserver (down, restarting, wrong URL): a follower may try again."""


def default_url() -> str:
    """ATLAS_DAGSTER_URL, else the local webserver."""
    return current_settings().dagster_url


@cache
def _document(name: str) -> str:
    return (GRAPHQL_DIR / f"{name}.graphql").read_text()


class DagsterApi:
    def __init__(self, url: str, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def call(
        self, name: str, variables: dict[str, Any], timeout: float | None = None
    ) -> dict[str, Any]:
        """One GraphQL request, answered within `timeout` seconds (default: the API's)."""
        body = json.dumps({"query": _document(name), "variables": variables}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                payload = json.loads(response.read())
        except (urllib.error.URLError, OSError) as exc:
            raise WebserverUnreachable(
                f"no Dagster webserver answers at {self.url} ({exc}); start it with `make dev`"
            ) from exc
        if payload.get("errors"):
            raise DagsterApiError(f"{name}: {payload['errors'][0].get('message')}")
        return payload["data"]

    def launch_backfill(
        self,
        partitions_by_asset: dict[str, list[tuple[str, str]]],
        title: str,
        tags: dict[str, str],
    ) -> str:
        """Launches an asset backfill, as the UI's dialog does; returns its id."""
        params = {
            "partitionsByAssets": [
                {
                    "assetKey": {"path": [asset]},
                    "partitions": {"ranges": [{"start": s, "end": e} for s, e in ranges]},
                }
                for asset, ranges in partitions_by_asset.items()
            ],
            "title": title,
            "tags": [{"key": k, "value": v} for k, v in tags.items()],
        }
        result = self.call("launch_backfill", {"params": params})["launchPartitionBackfill"]
        if result["__typename"] != "LaunchBackfillSuccess":
            raise DagsterApiError(f"the backfill was refused: {result.get('message')}")
        return result["backfillId"]

    def backfill_status(self, backfill_id: str, timeout: float | None = None) -> dict[str, Any]:
        result = self.call("backfill_status", {"backfillId": backfill_id}, timeout)
        backfill = result["partitionBackfillOrError"]
        if backfill["__typename"] != "PartitionBackfill":
            raise DagsterApiError(f"backfill {backfill_id}: {backfill.get('message')}")
        return backfill

    def cancel_backfill(self, backfill_id: str) -> None:
        result = self.call("cancel_backfill", {"backfillId": backfill_id})
        outcome = result["cancelPartitionBackfill"]
        if outcome["__typename"] != "CancelBackfillSuccess":
            raise DagsterApiError(f"cancel {backfill_id}: {outcome.get('message')}")

    def unfinished_runs(self, backfill_id: str) -> list[str]:
        """The backfill's runs still queued or in progress."""
        statuses = ["QUEUED", "NOT_STARTED", "STARTING", "STARTED"]
        return [run["runId"] for run in self._runs(backfill_id, statuses)]

    def time_left(self, backfill_id: str, timeout: float | None = None) -> list[str]:
        """Each of the backfill's running raw runs' days left and their time, as the run last
        published it (TIME_LEFT_TAG, monitoring/pace.py's computation)."""
        runs = self._runs(backfill_id, ["STARTED"], timeout)
        tags = [{t["key"]: t["value"] for t in run.get("tags") or []} for run in runs]
        return [found[TIME_LEFT_TAG] for found in tags if TIME_LEFT_TAG in found]

    def _runs(
        self, backfill_id: str, statuses: list[str], timeout: float | None = None
    ) -> list[dict[str, Any]]:
        tags = [{"key": BACKFILL_ID_TAG, "value": backfill_id}]
        run_filter = {"tags": tags, "statuses": statuses}
        result = self.call("backfill_runs", {"filter": run_filter}, timeout)["runsOrError"]
        if result["__typename"] != "Runs":
            raise DagsterApiError(f"runs of backfill {backfill_id}: {result.get('message')}")
        return result["results"]

    def terminate_run(self, run_id: str) -> None:
        outcome = self.call("terminate_run", {"runId": run_id})["terminateRun"]
        if outcome["__typename"] != "TerminateRunSuccess":
            raise DagsterApiError(f"terminate {run_id}: {outcome.get('message')}")
