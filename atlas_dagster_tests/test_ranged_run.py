"""One ranged run (as `atlas-dagster load` and a backfill make them) keeps every per-day guarantee
while it shares its bulk reads across days: attempts, days to clear, progress metadata."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from dagster import AssetKey, DagsterEventType, instance_for_test

from atlas_dagster.checks.export_window import ExportState
from atlas_dagster.checks.raw import CheckedDay, batch_outcomes
from atlas_dagster.checks.results import to_evaluation
from atlas_dagster.cli.demo_data import GENERATORS, arrow_table, write_day
from atlas_dagster.domains import get_domain
from atlas_dagster.exports.layout import day_folder
from atlas_dagster_tests.conftest import log_row, scalar
from testkit.gold_support import materialize_range

FIRST, LAST = dt.date(2026, 11, 2), dt.date(2026, 11, 5)
RELOADED, BROKEN = dt.date(2026, 11, 4), dt.date(2026, 11, 3)
DOMAINS = ("user", "transactions")


def _days() -> list[dt.date]:
    return [FIRST + dt.timedelta(days=i) for i in range((LAST - FIRST).days + 1)]


def _rows(tenant, domain: str, day: dt.date, n: int) -> list[dict]:
    generate, _ = GENERATORS[domain]
    return generate(random.Random(f"ranged-{tenant.key}-{domain}-{day}"), tenant, day, n)


def _final_count(clickhouse, tenant, domain: str, day: dt.date) -> int:
    return int(
        scalar(
            clickhouse,
            f"SELECT count() FROM atlas.tbt_raw_events_{domain} FINAL WHERE organization_id = "
            "{o:String} AND event_date = {d:Date}",
            o=tenant.organization_id,
            d=day,
        )
    )


def _materialize_range(clickhouse, tenant, instance, first: dt.date, last: dt.date):
    return materialize_range(clickhouse, tenant, list(DOMAINS), instance, first, last)


def test_a_ranged_run_keeps_each_days_guarantees(clickhouse, make_tenant) -> None:
    tenant = make_tenant(DOMAINS)
    expected: dict[tuple[str, dt.date], int] = {}
    for domain in DOMAINS:
        for day in _days():
            rows = _rows(tenant, domain, day, 120)
            write_day(tenant, domain, day, rows)
            expected[(domain, day)] = len(rows)

    with instance_for_test() as instance:
        # A first run loads RELOADED; its export is then re-delivered smaller.
        assert _materialize_range(clickhouse, tenant, instance, RELOADED, RELOADED).success
        for domain in DOMAINS:
            smaller = _rows(tenant, domain, RELOADED, 120)[:70]
            write_day(tenant, domain, RELOADED, smaller, files=1)
            expected[(domain, RELOADED)] = len(smaller)
        # BROKEN's transactions: a negative amount far past any sample, no statistics.
        table = arrow_table("transactions", _rows(tenant, "transactions", BROKEN, 1500))
        amounts = table.column("amount").to_pylist()
        amounts[1200] = -amounts[1200]
        table = table.set_column(
            table.schema.get_field_index("amount"),
            "amount",
            pa.array(amounts, pa.decimal128(18, 4)),
        )
        folder = day_folder(tenant, "transactions", BROKEN)[len("file://") :]
        for old in Path(folder).glob("*.parquet"):
            old.unlink()
        pq.write_table(table, f"{folder}/part-0.parquet", write_statistics=False)

        result = _materialize_range(clickhouse, tenant, instance, FIRST, LAST)
        assert not result.success  # BROKEN's transactions day failed, alone

        materialized = {
            (m.asset_key.path[-1], m.partition)
            for m in result.asset_materializations_for_node("raw_events")
        }
        # Stored by the run in batches (not yielded through the step): read from the instance.
        checks = [
            e.get_dagster_event().asset_check_evaluation_data
            for e in instance.all_logs(
                result.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION
            )
        ]
        in_order = result.asset_materializations_for_node("raw_events")
        with_progress = [m for m in in_order if "backfill_progress" in m.metadata]
        last_has_progress = "backfill_progress" in in_order[-1].metadata
        lines = [e.user_message for e in instance.all_logs(result.run_id) if not e.is_dagster_event]

    # The run log names every day that started and every day loaded, a few days to a line.
    started = [line for line in lines if line.startswith("INSERT started: ")]
    loaded = [line for line in lines if line.startswith("loaded: ")]
    for domain in DOMAINS:
        for day in _days():
            label = f"tbt_raw_events_{domain} {day}|{tenant.key}"
            ok = (domain, day) != ("transactions", BROKEN)
            assert not ok or any(f"{label} (worker " in line for line in started), label
            assert any(f"{label}: " in line and " rows from " in line for line in loaded) == ok
    for domain in DOMAINS:
        for day in _days():
            entry = log_row(clickhouse, tenant, domain, day)
            key = (f"tbt_raw_events_{domain}", f"{day}|{tenant.key}")
            if (domain, day) == ("transactions", BROKEN):
                assert entry["status"] == "failed"
                assert "part-0.parquet: column amount is negative" in entry["error_message"]
                assert str(BROKEN) in entry["error_message"]
                assert _final_count(clickhouse, tenant, domain, day) == 0
                assert key not in materialized
                continue
            assert entry["status"] == "completed", (domain, day, entry["error_message"])
            assert entry["rows_loaded"] == expected[(domain, day)]
            assert _final_count(clickhouse, tenant, domain, day) == expected[(domain, day)]
            assert entry["attempt"] == (2 if day == RELOADED else 1)
            assert entry["started_at"] <= entry["updated_at"]
            assert key in materialized
    # Each tenant-day-domain's three checks on its own partition, failed ones included.
    per_partition: dict[tuple[str, str], int] = {}
    for evaluation in checks:
        asset = evaluation.asset_key.path[-1]
        per_partition[(asset, evaluation.partition)] = (
            per_partition.get((asset, evaluation.partition), 0) + 1
        )
    assert len(per_partition) == len(DOMAINS) * len(_days())
    assert set(per_partition.values()) == {3}
    failed = {(e.asset_key.path[-1], e.partition, e.check_name) for e in checks if not e.passed}
    assert ("tbt_raw_events_transactions", f"{BROKEN}|{tenant.key}", "log_completed") in failed
    # A loaded day's checks read the log (FINAL) and the raw table after the load: the same
    # evaluations as a later read of the same days (verify's path).
    by_check = {(e.asset_key.path[-1], e.partition, e.check_name): e for e in checks}
    with clickhouse.session() as client:
        for domain in DOMAINS:
            for day in (FIRST, RELOADED, LAST):
                asset, partition = f"tbt_raw_events_{domain}", f"{day}|{tenant.key}"
                files = by_check[(asset, partition, "schema_conformance")].metadata["files"]
                export = ExportState(files=files.value, rows=expected[(domain, day)], error=None)
                checked = CheckedDay(tenant, get_domain(domain), day, export)
                [(_, fresh)] = batch_outcomes(client, [checked])
                for outcome in fresh:
                    read = to_evaluation(AssetKey(asset), partition, outcome)
                    loaded = by_check[(asset, partition, outcome.check_name)]
                    assert read.passed and loaded.passed, (asset, partition, outcome)
                    assert (loaded.description, loaded.metadata) == (
                        read.description,
                        read.metadata,
                    )
        spans = {
            (domain, day): client.query(
                f"SELECT min(ingested_at), max(ingested_at) FROM atlas.tbt_raw_events_{domain} "
                "WHERE organization_id = {o:String} AND event_date = {d:Date}",
                parameters={"o": tenant.organization_id, "d": day},
            ).result_rows[0]
            for domain in DOMAINS
            for day in (FIRST, LAST)
        }
    # Each day's own 'running' row (written by the day ahead of it on the engine, or by itself;
    # its time is the 'completed' row's started_at) precedes its INSERT's rows, and its
    # 'completed' row follows them.
    for (domain, day), (first, last) in spans.items():
        entry = log_row(clickhouse, tenant, domain, day)
        started, updated = entry["started_at"], entry["updated_at"]
        assert started.replace(tzinfo=None) < first.replace(tzinfo=None), (started, first)
        assert last.replace(tzinfo=None) < updated.replace(tzinfo=None), (last, updated)
    # Progress metadata rides on the first and the last materialization, not on every day.
    assert last_has_progress and 2 <= len(with_progress) < len(materialized)
