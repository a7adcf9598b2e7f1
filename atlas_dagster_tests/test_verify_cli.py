"""`atlas-dagster verify` runs raw and gold checks through a persistent Dagster instance."""

from __future__ import annotations

import datetime as dt
import os
import random
from pathlib import Path

import pytest
from dagster import (
    AssetCheckKey,
    AssetKey,
    AssetSelection,
    DagsterEventType,
    DagsterInstance,
    materialize,
)

from atlas_dagster.assets.gold import RECONCILES_RAW
from atlas_dagster.checks.raw import RAW_CHECK_NAMES
from atlas_dagster.cli import verify as verify_cli
from atlas_dagster.cli.demo_data import GENERATORS, write_day
from atlas_dagster.cli.main import main
from atlas_dagster.cli.verify import stored_evaluations
from atlas_dagster.core.tags import VERIFY_TAG
from atlas_dagster.definitions import build_definitions
from atlas_dagster.orchestration.verify_job import VERIFY_RAW_JOB
from atlas_dagster.resources.clickhouse import ClickHouseResource
from testkit.dagster_stack import cli_site

pytestmark = pytest.mark.slow  # seconds per test: real loads and runs

FIRST, LAST = dt.date(2026, 11, 1), dt.date(2026, 11, 2)
RANGE_TAGS = {
    "dagster/asset_partition_range_start": f"{FIRST}|verify.main",
    "dagster/asset_partition_range_end": f"{LAST}|verify.main",
}


@pytest.fixture
def verify_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClickHouseResource:
    tenant = cli_site(
        tmp_path,
        monkeypatch,
        {
            "organization_id": "verify",
            "start_date": FIRST.isoformat(),
            "end_date": LAST.isoformat(),
            "domains": ["transactions"],
        },
    )
    dsn = os.environ["ATLAS_CLICKHOUSE_DSN"]
    for offset in range(2):
        day = FIRST + dt.timedelta(days=offset)
        rows = GENERATORS["transactions"][0](random.Random(str(day)), tenant, day, 120)
        write_day(tenant, "transactions", day, rows)
    _materialize(["tbt_raw_events_transactions"], RANGE_TAGS)
    return ClickHouseResource(dsn=dsn)


def _materialize(selection: list[str], tags: dict[str, str]) -> str:
    """One run on the instance of DAGSTER_HOME, as the code location defines it; its run id."""
    definitions = build_definitions()
    with DagsterInstance.get() as instance:
        result = materialize(
            list(definitions.assets or []),
            selection=selection,
            instance=instance,
            resources=definitions.resources,
            tags=tags,
        )
    assert result.success
    return result.run_id


def _replay_gold(tags: dict[str, str] = RANGE_TAGS) -> str:
    return _materialize(["gold_transactions_daily", "gold_users_daily"], tags)


def test_verify_passes_then_names_a_tampered_gold_day(verify_env, capsys) -> None:
    _replay_gold()
    assert main(["verify", "--org", "verify", "--brand", "main"]) == 0
    passing = capsys.readouterr().out
    assert f"ok    {LAST}  gold_transactions_daily" in passing
    assert f"ok    {FIRST}  transactions" in passing
    # 2 days × (3 raw checks + gold_transactions_daily + gold_users_daily)
    assert "10 passed, 0 failed" in passing

    with verify_env.session() as client:  # a gold row raw does not justify
        client.command(
            "INSERT INTO atlas.gold_transactions_daily (organization_id, brand_id, day, "
            "currency, deposits_count, deposits_amount, withdrawals_count, withdrawals_amount, "
            "net_deposits, computed_at, is_deleted) VALUES ('verify', 'main', {day:Date}, 'XXX', "
            "1, 10, 0, 0, 10, now64(6), 0)",
            parameters={"day": LAST},
        )
    assert main(["verify", "--org", "verify", "--brand", "main", "--layer", "gold"]) == 1
    failing = capsys.readouterr().out
    assert f"FAIL  {LAST}  gold_transactions_daily" in failing
    assert f"ok    {FIRST}  gold_transactions_daily" in failing
    assert "1 failed" in failing

    with DagsterInstance.get() as instance:  # the results are the instance's, shown in the UI
        key = AssetCheckKey(AssetKey("gold_transactions_daily"), "gold_reconciles_raw")
        record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
        assert record is not None


def test_verify_says_gold_not_replayed_for_a_day_gold_never_got(verify_env, capsys) -> None:
    _replay_gold({**RANGE_TAGS, "dagster/asset_partition_range_end": f"{FIRST}|verify.main"})
    assert main(["verify", "--org", "verify", "--brand", "main", "--layer", "gold"]) == 1
    lines = capsys.readouterr().out.splitlines()
    [missing] = [line for line in lines if line.startswith(f"FAIL  {LAST}  gold_transactions")]
    assert "gold not replayed" in missing and "differs" not in missing
    assert [line for line in lines if line.startswith(f"ok    {FIRST}  gold_transactions")]


def test_no_run_log_carries_expected_outputs(verify_env, capsys) -> None:
    """Raw single and ranged runs, a gold run, the raw verify run and gold check-only runs
    report their checks the way Dagster expects them: no "did not yield or return expected
    outputs" line in any run log."""
    _replay_gold()
    _materialize(["tbt_raw_events_transactions"], {"dagster/partition": f"{LAST}|verify.main"})
    assert main(["verify", "--org", "verify", "--brand", "main"]) == 0
    capsys.readouterr()
    with DagsterInstance.get() as instance:
        runs = instance.get_runs()
        # raw ranged (fixture), gold ranged, raw single partition, verify: raw, then gold
        assert len(runs) == 5
        for run in runs:
            messages = [entry.message for entry in instance.all_logs(run.run_id)]
            assert messages, run.run_id
            assert not [m for m in messages if "expected outputs" in m], run.tags
            evaluations = [
                entry.dagster_event.event_specific_data
                for entry in instance.all_logs(run.run_id)
                if entry.dagster_event
                and entry.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION"
            ]
            # One result per tenant-day and check, each naming its partition.
            assert evaluations and all(e.partition for e in evaluations)
            keys = [(e.asset_key, e.check_name, e.partition) for e in evaluations]
            assert len(keys) == len(set(keys))


def test_the_raw_layer_is_one_verify_run_without_planned_checks(verify_env, capsys) -> None:
    """The raw checks of the whole window in one verify_raw run: each day's three results on
    its own partition, once, and not one check planned (no planned row per partition and
    check, whose cost grows with the square of a run's days)."""
    assert main(["verify", "--org", "verify", "--brand", "main", "--layer", "raw"]) == 0
    assert "6 passed, 0 failed over 2 tenant-day(s)" in capsys.readouterr().out
    with DagsterInstance.get() as instance:
        [run] = [r for r in instance.get_runs() if VERIFY_TAG in r.tags]
        assert run.job_name == VERIFY_RAW_JOB and run.tags[VERIFY_TAG] == "verify.main"
        types = [e.dagster_event_type for e in instance.all_logs(run.run_id) if e.dagster_event]
        assert DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED not in types
        evaluations = stored_evaluations(instance, run.run_id)
    assert sorted((e.partition, e.check_name) for e in evaluations) == sorted(
        (f"{day}|verify.main", name) for day in (FIRST, LAST) for name in RAW_CHECK_NAMES
    )
    assert all(e.passed and e.target_materialization_data for e in evaluations)


def test_a_gold_window_longer_than_a_run_is_checked_in_bounded_runs(
    verify_env, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each gold check run covers at most RUN_DAYS days (newest first); every day's results
    still land on its own partition, once, and the printed table covers the whole window."""
    _replay_gold()
    monkeypatch.setattr(verify_cli, "RUN_DAYS", 1)
    assert main(["verify", "--org", "verify", "--brand", "main", "--layer", "gold"]) == 0
    out = capsys.readouterr().out
    assert "4 passed, 0 failed over 4 tenant-day(s)" in out
    with DagsterInstance.get() as instance:
        runs = sorted(
            (r for r in instance.get_runs() if VERIFY_TAG in r.tags),
            key=lambda r: instance.get_run_record_by_id(r.run_id).create_timestamp,
        )
        assert [r.tags["dagster/asset_partition_range_start"][:10] for r in runs] == [
            str(LAST),
            str(FIRST),
        ]
        for run in runs:
            day = run.tags["dagster/asset_partition_range_start"]
            assert run.tags["dagster/asset_partition_range_end"] == day
            evaluations = [
                entry.dagster_event.event_specific_data
                for entry in instance.all_logs(run.run_id)
                if entry.dagster_event
                and entry.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION"
            ]
            assert sorted(e.check_name for e in evaluations) == [RECONCILES_RAW] * 2
            assert {e.partition for e in evaluations} == {day}


def test_ranges_cut_the_window_newest_first() -> None:
    ranges = verify_cli._ranges(dt.date(2026, 1, 1), dt.date(2026, 1, 10), 4)
    assert ranges == [
        (dt.date(2026, 1, 7), dt.date(2026, 1, 10)),
        (dt.date(2026, 1, 3), dt.date(2026, 1, 6)),
        (dt.date(2026, 1, 1), dt.date(2026, 1, 2)),
    ]
    assert verify_cli._ranges(dt.date(2026, 1, 1), dt.date(2026, 1, 1), 92) == [
        (dt.date(2026, 1, 1), dt.date(2026, 1, 1))
    ]


def test_a_check_only_run_of_the_raw_checks_reports_each_day(verify_env) -> None:
    """The UI's "Execute checks" on a range of partitions makes a check-only run of the raw
    step: it re-reads the days as verify does and reports each day's checks on its partition
    (a day whose raw rows were deleted fails rows_reconcile)."""
    with verify_env.session() as client:
        client.command(
            "DELETE FROM atlas.tbt_raw_events_transactions WHERE event_date = {d:Date} "
            "AND event_id IN (SELECT event_id FROM atlas.tbt_raw_events_transactions "
            "WHERE event_date = {d:Date} ORDER BY event_id LIMIT 2)",
            parameters={"d": FIRST},
        )
    definitions = build_definitions()
    checks = AssetSelection.checks(
        *[AssetCheckKey(AssetKey("tbt_raw_events_transactions"), n) for n in RAW_CHECK_NAMES]
    )
    with DagsterInstance.get() as instance:
        result = materialize(
            list(definitions.assets or []),
            selection=checks,
            instance=instance,
            resources=definitions.resources,
            tags=RANGE_TAGS,
        )
        evaluations = stored_evaluations(instance, result.run_id)
    assert result.success
    found = {(e.partition, e.check_name): (e.passed, e.description) for e in evaluations}
    assert len(found) == len(evaluations) == 6
    assert found[(f"{FIRST}|verify.main", "rows_reconcile")] == (
        False,
        "the raw table holds 118 distinct events, the log 120",
    )
    assert all(passed for key, (passed, _) in found.items() if key[1] != "rows_reconcile")
    assert found[(f"{LAST}|verify.main", "rows_reconcile")][0]
