"""The reprocessing workflow an operator follows when a client re-delivers corrected days, through
the CLI on a real instance and engine: five days loaded and their gold built; then day 3's casino
file comes again with corrected win amounts (same rows, other values) and day 4's transactions
with two more deposits. `status --json` lists exactly those two days, `verify` fails naming both,
`load --only-changed` reloads only them, gold automation requests the gold of exactly those days,
raw and gold then equal the new export to the cent, a second `--only-changed` reloads nothing,
and `verify --layer all` passes."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dagster import AssetKey, DagsterInstance, Definitions, materialize
from dagster import evaluate_automation_conditions as evaluate

from atlas_dagster.cli.demo_data import GENERATORS, arrow_table, write_day
from atlas_dagster.cli.main import main
from atlas_dagster.definitions import build_definitions
from atlas_dagster.exports.layout import day_folder
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.settings import DEFAULT_LIABILITY_LOOKBACK_DAYS
from atlas_dagster.tenants import Tenant
from atlas_dagster_tests.conftest import log_row
from testkit import gold_reference as reference
from testkit.dagster_stack import cli_site
from testkit.gold_support import assert_gold_to_the_cent

pytestmark = pytest.mark.slow  # real loads, gold runs and automation evaluations

DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(5)]
DOMAINS = ("casino", "transactions")
# The gold tables of a casino + transactions tenant (liability is sportsbook's).
GOLD = ("gold_ggr_daily", "gold_transactions_daily", "gold_users_daily")


@pytest.fixture
def tenant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tenant:
    tenant = cli_site(
        tmp_path,
        monkeypatch,
        {
            "organization_id": "reproc",
            "start_date": DAYS[0].isoformat(),
            "end_date": DAYS[-1].isoformat(),
            "domains": list(DOMAINS),
        },
    )
    for domain in DOMAINS:
        for day in DAYS:
            write_day(tenant, domain, day, _rows(tenant, domain, day, 30))
    return tenant


def _rows(tenant: Tenant, domain: str, day: dt.date, n: int) -> list[dict]:
    return GENERATORS[domain][0](random.Random(f"reproc-{domain}-{day}"), tenant, day, n)


def _cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main([*args[:1], "--org", "reproc", "--brand", "main", *args[1:]])
    return code, capsys.readouterr().out


def _attempts(clickhouse: ClickHouseResource, tenant: Tenant) -> dict[tuple[str, dt.date], int]:
    return {
        (domain, day): int(log_row(clickhouse, tenant, domain, day)["attempt"])
        for domain in DOMAINS
        for day in DAYS
    }


def _redeliver(tenant: Tenant) -> None:
    """Day 3's casino with corrected amounts (same file names and rows); day 4's transactions
    with two more deposits in a file of their own."""
    folder = Path(day_folder(tenant, "casino", DAYS[2])[len("file://") :])
    for path in sorted(folder.glob("*.parquet")):
        table = pq.read_table(path)
        rows = [r | {"amount": Decimal(r["amount"]) + Decimal("1.25")} for r in table.to_pylist()]
        pq.write_table(arrow_table("casino", rows), path)
    extra = _rows(tenant, "transactions", DAYS[3], 2)
    for i, row in enumerate(extra):
        row |= {"event_id": f"late-{i}", "transaction_id": f"late-{i}", "event_type": "deposit"}
    folder = Path(day_folder(tenant, "transactions", DAYS[3])[len("file://") :])
    pq.write_table(arrow_table("transactions", extra), folder / "part-late.parquet")


def _gold_requested(definitions: Definitions, instance: DagsterInstance, cursor=None):
    """What gold automation requests now (its condition, evaluated as the sensor does)."""
    result = evaluate(defs=definitions, instance=instance, cursor=cursor)
    requested = {name: set(result.get_requested_partitions(AssetKey(name))) for name in GOLD_TABLES}
    return {name: keys for name, keys in requested.items() if keys}, result.cursor


def _materialize_gold(definitions: Definitions, keys_by_table: dict[str, set[str]]) -> None:
    """Each table's partitions in one ranged run (their span: a day between two requested ones
    is replayed too, harmlessly), as automation's runs would replay them."""
    with DagsterInstance.get() as instance:
        for table, keys in keys_by_table.items():
            result = materialize(
                list(definitions.assets or []),
                selection=[table],
                instance=instance,
                resources=definitions.resources,
                tags={
                    "dagster/asset_partition_range_start": min(keys),
                    "dagster/asset_partition_range_end": max(keys),
                },
            )
            assert result.success, (table, keys)


def _assert_raw_and_gold_equal_the_export(clickhouse: ClickHouseResource, tenant: Tenant) -> None:
    for domain in DOMAINS:
        for day in DAYS:
            expected = reference.events(tenant, domain, [day])
            with clickhouse.session() as client:
                count, total = client.query(
                    f"SELECT count(), toString(sum(amount)) FROM atlas.tbt_raw_events_{domain} "
                    "FINAL WHERE organization_id = 'reproc' AND event_date = {d:Date}",
                    parameters={"d": day},
                ).result_rows[0]
            assert int(count) == len(expected), (domain, day)
            assert Decimal(total) == sum(Decimal(str(r["amount"])) for r in expected), (domain, day)
    assert_gold_to_the_cent(clickhouse, tenant, DAYS, DEFAULT_LIABILITY_LOOKBACK_DAYS, GOLD)


def test_a_redelivered_period_is_found_reloaded_and_replayed_exactly(
    tenant: Tenant, capsys: pytest.CaptureFixture
) -> None:
    clickhouse = ClickHouseResource(dsn=os.environ["ATLAS_CLICKHOUSE_DSN"])
    definitions = build_definitions()
    assert _cli(capsys, "load")[0] == 0
    every_key = {f"{day}|{tenant.key}" for day in DAYS}
    _materialize_gold(definitions, {table: every_key for table in GOLD})
    with DagsterInstance.get() as instance:
        requested, cursor = _gold_requested(definitions, instance)
    assert requested == {}  # every gold day is as fresh as its raw
    assert _cli(capsys, "load")[1].startswith("nothing to load for reproc.main")

    _redeliver(tenant)
    code, out = _cli(capsys, "status", "--json")
    assert code == 0
    changed = json.loads(out)["changed"]
    assert [(c["domain"], c["partition_date"]) for c in changed] == [
        ("transactions", str(DAYS[3])),
        ("casino", str(DAYS[2])),
    ], changed
    assert changed[0]["reason"] == "part-late.parquet added"
    assert changed[1]["reason"].endswith("replaced: part-00000.parquet, part-00001.parquet")
    code, out = _cli(capsys, "verify", "--layer", "raw")
    assert code == 1
    failing = [line.split()[1:3] for line in out.splitlines() if line.startswith("FAIL")]
    assert failing == [[str(DAYS[3]), "transactions"], [str(DAYS[2]), "casino"]], out
    assert "the export changed since the day was loaded (part-late.parquet added)" in out
    code, out = _cli(capsys, "backfill", "--only-changed", "--dry-run")
    assert code == 0
    assert f"{DAYS[2]}  casino" in out and f"{DAYS[3]}  transactions" in out, out
    assert "2 tenant-day(s)" in out, out
    code, out = _cli(capsys, "backfill", "--dry-run")  # the default: incomplete days only
    assert code == 0 and "plan for reproc.main: 0 tenant-day(s)" in out, out
    assert "changed since loaded: 2 completed tenant-day(s)" in out, out
    assert f"  {DAYS[3]}  transactions  part-late.parquet added" in out, out

    before = _attempts(clickhouse, tenant)
    assert _cli(capsys, "load", "--only-changed")[0] == 0
    after = _attempts(clickhouse, tenant)
    reloaded = {key for key in after if after[key] != before[key]}
    assert reloaded == {("casino", DAYS[2]), ("transactions", DAYS[3])}

    # Gold automation asks for the gold of the reloaded days and of nothing else.
    with DagsterInstance.get() as instance:
        requested, _ = _gold_requested(definitions, instance, cursor)
    day3, day4 = f"{DAYS[2]}|{tenant.key}", f"{DAYS[3]}|{tenant.key}"
    assert requested == {
        "gold_ggr_daily": {day3},
        "gold_users_daily": {day3, day4},
        "gold_transactions_daily": {day4},
    }
    _materialize_gold(definitions, requested)
    _assert_raw_and_gold_equal_the_export(clickhouse, tenant)

    code, out = _cli(capsys, "load", "--only-changed")
    assert code == 0 and "no loaded day's export changed since its load" in out, out
    assert _attempts(clickhouse, tenant) == after
    code, out = _cli(capsys, "verify", "--layer", "all")
    assert code == 0, out
