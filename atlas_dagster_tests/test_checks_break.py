"""Each raw check goes red when the thing it watches breaks after a good load, at load time where
that applies and in `verify`, with a message naming the difference, and the check's partition
health view (what the UI's asset check page shows) marks the day failed.

The breaks: the day's 'completed' log row loses to an older version or is superseded by a
'failed' row; raw rows disappear after the load counted them; the export is replaced with more
rows, or with a row breaking the contract. At load time the break happens between the load's
'completed' row and its checks' batch read (another writer, as the stale-load sweep or an
operator's DELETE would be), through a wrapper around the load's own step.
"""

from __future__ import annotations

import datetime as dt
import os
import random
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import DagsterEventType, DagsterInstance, materialize
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

from atlas_dagster import sql
from atlas_dagster.cli.demo_data import GENERATORS, arrow_table, write_day
from atlas_dagster.cli.main import main
from atlas_dagster.definitions import build_definitions
from atlas_dagster.exports.layout import day_folder
from atlas_dagster.loading import backfill_log, day_load
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import run_command
from atlas_dagster.tenants import Tenant
from testkit.dagster_stack import REPO, cli_site

pytestmark = pytest.mark.slow  # real loads, runs and a code server

FIRST, LAST = dt.date(2026, 11, 1), dt.date(2026, 11, 3)
BROKEN = dt.date(2026, 11, 2)
DAYS = [FIRST, BROKEN, LAST]
OTHER_DAYS = {str(FIRST), str(LAST)}
ROWS = 120
ASSET = "tbt_raw_events_transactions"
TENANT = "brk.main"
RANGE_TAGS = {
    "dagster/asset_partition_range_start": f"{FIRST}|{TENANT}",
    "dagster/asset_partition_range_end": f"{LAST}|{TENANT}",
}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tenant:
    """A tenant with three days of transactions exported, a fresh instance and engine."""
    tenant = cli_site(
        tmp_path,
        monkeypatch,
        {
            "organization_id": "brk",
            "start_date": FIRST.isoformat(),
            "end_date": LAST.isoformat(),
            "domains": ["transactions"],
        },
    )
    for day in DAYS:
        write_day(tenant, "transactions", day, _rows(tenant, day, ROWS))
    return tenant


def _rows(tenant: Tenant, day: dt.date, n: int) -> list[dict]:
    return GENERATORS["transactions"][0](random.Random(str(day)), tenant, day, n)


def _load() -> tuple[bool, dict[tuple[str, str], tuple[bool, str]]]:
    """One ranged load run over the three days; (success, {(check, day): (passed, text)})."""
    definitions = build_definitions()
    with DagsterInstance.get() as instance:
        result = materialize(
            list(definitions.assets or []),
            selection=[ASSET],
            instance=instance,
            resources=definitions.resources,
            tags=RANGE_TAGS,
            raise_on_error=False,
        )
        found = {}
        for entry in instance.all_logs(
            result.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION
        ):
            evaluation = entry.get_dagster_event().asset_check_evaluation_data
            day = (evaluation.partition or "").split("|")[0]
            found[(evaluation.check_name, day)] = (evaluation.passed, evaluation.description or "")
    return result.success, found


def _verify(capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["verify", "--org", "brk", "--brand", "main", "--layer", "raw"])
    return code, capsys.readouterr().out.splitlines()


def _line(lines: list[str], state: str, day: dt.date, check: str) -> str:
    """verify's printed line of one day's check ("ok  " or "FAIL")."""
    [found] = [
        line
        for line in lines
        if line.startswith(f"{state}  {day}  transactions ") and f" {check} " in f"{line} "
    ]
    return found


def _others_pass(checks: dict[tuple[str, str], tuple[bool, str]], *broken: str) -> None:
    """Every check of the days left alone passed, and the broken day's other checks too."""
    for (name, day), (passed, text) in checks.items():
        if day != str(BROKEN) or name not in broken:
            assert passed, (name, day, text)
    assert len(checks) == 3 * len(DAYS)


def _log_row(client, entry: backfill_log.LogEntry, **changes: object) -> None:
    """A backfill_log row of the entry's day, as another writer would write it."""
    values = {name: getattr(entry, name) for name in backfill_log.COLUMNS} | changes
    run_command(client, sql.query("log_state"), values)


def _delete_raw_rows(client, tenant: Tenant, day: dt.date, n: int) -> None:
    run_command(
        client,
        f"DELETE FROM atlas.{ASSET} WHERE organization_id = {{o:String}} "
        "AND event_date = {d:Date} AND event_id IN (SELECT event_id FROM atlas."
        f"{ASSET} WHERE organization_id = {{o:String}} AND event_date = {{d:Date}} "
        "ORDER BY event_id LIMIT {n:UInt32})",
        {"o": tenant.organization_id, "d": day, "n": n},
    )


def _after_completed(
    monkeypatch: pytest.MonkeyPatch, act: Callable[[object, backfill_log.LogEntry], None]
) -> None:
    """Runs `act(client, entry)` for BROKEN right after its load logs 'completed', in the
    load's session: another writer between the load and its checks' batch read."""
    original = day_load._log_completed

    def log_completed(client, entry, timer, after_load):
        original(client, entry, timer, after_load)
        if entry.partition_date == BROKEN:
            act(client, entry)

    monkeypatch.setattr(day_load, "_log_completed", log_completed)


def _set_env(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixture's variables again (after monkeypatch.undo() dropped the test's patches)."""
    root = Path(tenant.source[len("file://") :]).parent
    monkeypatch.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    monkeypatch.setenv("ATLAS_TENANTS_FILE", str(root / "tenants.yaml"))
    monkeypatch.setenv("ATLAS_CLICKHOUSE_DSN", f"chdb://{root / 'clickhouse'}")


def _current_entry(client, tenant: Tenant, day: dt.date) -> backfill_log.LogEntry:
    """The day's current backfill_log row (FINAL) as a LogEntry."""
    result = client.query(
        "SELECT * FROM atlas.backfill_log FINAL WHERE organization_id = {o:String} "
        "AND brand_id = {b:String} AND domain = 'transactions' AND partition_date = {d:Date}",
        parameters={"o": tenant.organization_id, "b": tenant.brand_id, "d": day},
    )
    [row] = [dict(zip(result.column_names, r, strict=True)) for r in result.result_rows]
    entry = backfill_log.LogEntry(
        tenant.organization_id, tenant.brand_id, "transactions", day, row["run_id"]
    )
    for name in backfill_log.COLUMNS:
        value = row[name]
        setattr(entry, name, value.replace(tzinfo=None) if hasattr(value, "tzinfo") else value)
    return entry


QUERY = """
query CheckPartitions($assetKey: AssetKeyInput!) {
  assetNodeOrError(assetKey: $assetKey) {
    ... on AssetNode {
      assetChecksOrError {
        ... on AssetChecks {
          checks {
            name
            partitionStatuses {
              ... on AssetCheckMultiPartitionStatuses {
                ranges {
                  primaryDimStartKey
                  primaryDimEndKey
                  secondaryDim {
                    ... on AssetCheckDefaultPartitionStatuses {
                      succeededPartitions
                      failedPartitions
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}
"""


def _health() -> dict[str, dict[str, set[str]]]:
    """Per check: the days the UI's partition health view shows succeeded and failed (the
    webserver's GraphQL, resolved against a code server of the project's workspace)."""
    with (
        DagsterInstance.get() as instance,
        define_out_of_process_context(str(REPO / "workspace.yaml"), None, instance) as context,
    ):
        result = execute_dagster_graphql(context, QUERY, {"assetKey": {"path": [ASSET]}})
    assert not result.errors, result.errors
    checks = result.data["assetNodeOrError"]["assetChecksOrError"]["checks"]
    health: dict[str, dict[str, set[str]]] = {}
    for check in checks:
        states: dict[str, set[str]] = {"succeeded": set(), "failed": set()}
        for span in check["partitionStatuses"]["ranges"]:
            start = dt.date.fromisoformat(span["primaryDimStartKey"])
            end = dt.date.fromisoformat(span["primaryDimEndKey"])
            days = {str(start + dt.timedelta(days=i)) for i in range((end - start).days + 1)}
            if span["secondaryDim"]["succeededPartitions"]:
                states["succeeded"] |= days
            if span["secondaryDim"]["failedPartitions"]:
                states["failed"] |= days
        health[check["name"]] = states
    return health


# --------------------------------------------------------------------------- log_completed


def test_log_completed_goes_red_when_the_completed_row_loses_to_an_older_version(
    env, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load's 'completed' row is written with a version older than its 'running' row (a
    writer whose clock stepped back): FINAL keeps 'running', the day is not loaded."""
    write = backfill_log.write

    def completed_older(client, entry: backfill_log.LogEntry, status: str) -> None:
        if status != "completed" or entry.partition_date != BROKEN:
            return write(client, entry, status)
        entry.status = status
        _log_row(client, entry, updated_at=entry.updated_at - dt.timedelta(seconds=1))

    monkeypatch.setattr(backfill_log, "write", completed_older)
    success, checks = _load()

    assert not success  # the run fails naming the day whose checks failed after its load
    passed, text = checks[("log_completed", str(BROKEN))]
    assert not passed and text.startswith("backfill_log says running: attempt 1 of run "), text
    passed, text = checks[("rows_reconcile", str(BROKEN))]
    assert not passed and f"the day is not loaded (the raw table holds {ROWS}" in text, text
    _others_pass(checks, "log_completed", "rows_reconcile")

    code, lines = _verify(capsys)
    assert code == 1
    assert "backfill_log says running: attempt 1 of run " in _line(
        lines, "FAIL", BROKEN, "log_completed"
    )
    assert _line(lines, "ok  ", FIRST, "log_completed")
    health = _health()
    assert health["log_completed"] == {"succeeded": OTHER_DAYS, "failed": {str(BROKEN)}}


def test_log_completed_goes_red_when_a_failed_row_supersedes_the_completed_one(
    env, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after the load's 'completed' row, a 'failed' row of a later version (as the
    stale-load sweep writes one): at load time, then after a good load, in verify."""

    def stale_sweep(client, entry: backfill_log.LogEntry) -> None:
        _log_row(
            client,
            entry,
            status="failed",
            error_message="stale: worker pid 1 on host h is gone",
            updated_at=entry.updated_at + dt.timedelta(seconds=1),
        )

    _after_completed(monkeypatch, stale_sweep)
    success, checks = _load()

    said = "backfill_log says failed: stale: worker pid 1 on host h is gone"
    assert not success
    passed, text = checks[("log_completed", str(BROKEN))]
    assert not passed and text == said, text
    _others_pass(checks, "log_completed", "rows_reconcile")
    code, lines = _verify(capsys)
    assert code == 1 and said in _line(lines, "FAIL", BROKEN, "log_completed")

    # Loaded again, cleanly (the day passes), then superseded behind verify's back by a row of
    # an older attempt, later version: verify names the attempt that won.
    monkeypatch.undo()
    _set_env(env, monkeypatch)
    success, checks = _load()
    assert success and all(passed for passed, _ in checks.values())
    with ClickHouseResource(dsn=os.environ["ATLAS_CLICKHOUSE_DSN"]).session() as client:
        entry = _current_entry(client, env, BROKEN)
        _log_row(
            client,
            entry,
            status="running",
            attempt=entry.attempt - 1,
            updated_at=entry.updated_at + dt.timedelta(seconds=1),
        )
    code, lines = _verify(capsys)
    assert code == 1
    assert f"backfill_log says running: attempt {entry.attempt - 1} of run " in _line(
        lines, "FAIL", BROKEN, "log_completed"
    )
    assert _health()["log_completed"]["failed"] == {str(BROKEN)}


# --------------------------------------------------------------------------- rows_reconcile


def test_rows_reconcile_goes_red_when_raw_rows_disappear_after_the_count(
    env, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three of the day's raw rows are deleted right after the load counted them and logged
    'completed': the checks' fresh count says so, at load time and in verify."""
    _after_completed(monkeypatch, lambda client, entry: _delete_raw_rows(client, env, BROKEN, 3))
    success, checks = _load()

    said = f"the raw table holds {ROWS - 3} distinct events, the log {ROWS}"
    assert not success
    passed, text = checks[("rows_reconcile", str(BROKEN))]
    assert not passed and text == said, text
    _others_pass(checks, "rows_reconcile")
    code, lines = _verify(capsys)
    assert code == 1 and said in _line(lines, "FAIL", BROKEN, "rows_reconcile")
    assert _health()["rows_reconcile"] == {"succeeded": OTHER_DAYS, "failed": {str(BROKEN)}}


def test_rows_reconcile_and_schema_conformance_go_red_when_the_export_changes_after_the_load(
    env, capsys
) -> None:
    """After a good load, BROKEN's export is replaced with more rows and LAST's with a row
    breaking the contract (same row count, another file): verify names both, and the UI marks
    both failed. LAST's counts still agree: its rows_reconcile fails on the stored fingerprint
    alone (the files are not the ones loaded)."""
    success, checks = _load()
    assert success and all(passed for passed, _ in checks.values())

    write_day(env, "transactions", BROKEN, _rows(env, BROKEN, ROWS + 5), files=1)
    table = arrow_table("transactions", _rows(env, LAST, ROWS))
    users = table.column("user_id").to_pylist()
    users[7] = ""
    table = table.set_column(table.schema.get_field_index("user_id"), "user_id", pa.array(users))
    folder = Path(day_folder(env, "transactions", LAST)[len("file://") :])
    for old in folder.glob("*.parquet"):
        old.unlink()
    pq.write_table(table, folder / "part-0.parquet")

    code, lines = _verify(capsys)
    assert code == 1
    assert f"the export has {ROWS + 5} rows, the log {ROWS} + 0 duplicates" in _line(
        lines, "FAIL", BROKEN, "rows_reconcile"
    )
    # The contract's message names the file, column and row on the lines after the day's.
    assert "break the export contract" in _line(lines, "FAIL", LAST, "schema_conformance")
    assert "part-0.parquet: column user_id is empty" in "\n".join(lines)
    changed = "the export changed since the day was loaded (part-0.parquet added; 2 files "
    changed += "removed: part-00000.parquet, part-00001.parquet)"
    assert changed in _line(lines, "FAIL", LAST, "rows_reconcile")
    assert "the export has" not in _line(lines, "FAIL", LAST, "rows_reconcile")  # same count
    assert lines[-1] == "6 passed, 3 failed over 3 tenant-day(s)"
    health = _health()
    assert health["rows_reconcile"]["failed"] == {str(BROKEN), str(LAST)}
    assert health["schema_conformance"]["failed"] == {str(LAST)}
    assert health["schema_conformance"]["succeeded"] == {str(FIRST), str(BROKEN)}
