"""Replay semantics on chDB: idempotent, no stale keys after a raw reload, tenants kept apart."""

import datetime as dt
from decimal import Decimal

import pytest

from atlas_dagster.gold.replay import replay_day
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.resources.schema import ensure_schema
from testkit import gold_reference as reference
from testkit.gold_support import generated, gold_rows, load

pytestmark = pytest.mark.slow  # seconds per test: real loads and runs

DAY = dt.date(2026, 11, 5)
LOOKBACK = 3
DOMAINS_WITH_MONEY = ("casino", "transactions", "sportsbook")


def _replay_all(clickhouse, tenant, day: dt.date = DAY) -> dict[str, tuple[int, int]]:
    """Replays every gold table for the tenant-day; (rows written, tombstones) per table."""
    written = {}
    with clickhouse.session() as client:
        ensure_schema(client)
        for table in GOLD_TABLES.values():
            replay = replay_day(client, table, tenant, day, LOOKBACK)
            written[table.name] = (replay.rows_written, replay.rows_deleted)
    return written


def _all_gold(clickhouse, tenant, day: dt.date = DAY) -> dict[str, dict]:
    return {name: gold_rows(clickhouse, name, tenant, day) for name in GOLD_TABLES}


def _expected(tenant, day: dt.date = DAY) -> dict[str, dict]:
    return {
        "gold_ggr_daily": reference.ggr(tenant, day),
        "gold_transactions_daily": reference.transactions(tenant, day),
        "gold_users_daily": reference.users(tenant, day),
        "gold_sportsbook_liability_daily": reference.liability(tenant, day, LOOKBACK),
    }


def _with_gbp(rows: list[dict], every: int = 5) -> list[dict]:
    return [r | {"currency": "GBP"} if i % every == 0 else r for i, r in enumerate(rows)]


def test_replaying_twice_gives_the_same_rows(clickhouse, make_tenant) -> None:
    tenant = make_tenant()
    for domain in ("user", *DOMAINS_WITH_MONEY):
        load(clickhouse, tenant, domain, DAY, generated(tenant, domain, DAY))
    _replay_all(clickhouse, tenant)
    first = _all_gold(clickhouse, tenant)
    second_written = _replay_all(clickhouse, tenant)
    assert _all_gold(clickhouse, tenant) == first == _expected(tenant)
    assert all(deleted == 0 for _, deleted in second_written.values())


def test_reload_with_a_currency_removed_leaves_no_stale_rows(clickhouse, make_tenant) -> None:
    tenant = make_tenant()
    full = {d: _with_gbp(generated(tenant, d, DAY)) for d in DOMAINS_WITH_MONEY}
    for domain, rows in full.items():
        load(clickhouse, tenant, domain, DAY, rows)
    _replay_all(clickhouse, tenant)
    before = _all_gold(clickhouse, tenant)
    assert ("casino", "GBP") in before["gold_ggr_daily"]
    assert ("GBP",) in before["gold_transactions_daily"]

    # The client re-delivers the day: fewer rows, and no GBP at all.
    for domain, rows in full.items():
        smaller = [r for r in rows[: len(rows) // 2] if r["currency"] != "GBP"]
        load(clickhouse, tenant, domain, DAY, smaller)
    written = _replay_all(clickhouse, tenant)

    after = _all_gold(clickhouse, tenant)
    assert after == _expected(tenant)
    assert not any("GBP" in key for rows in after.values() for key in rows)
    assert written["gold_ggr_daily"][1] >= 1 and written["gold_transactions_daily"][1] == 1
    bets_after = sum(r["bets"] for r in after["gold_ggr_daily"].values())
    assert bets_after < sum(r["bets"] for r in before["gold_ggr_daily"].values())


def test_a_day_emptied_by_a_reload_is_tombstoned(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("transactions",))
    load(clickhouse, tenant, "transactions", DAY, generated(tenant, "transactions", DAY))
    _replay_all(clickhouse, tenant)
    assert gold_rows(clickhouse, "gold_users_daily", tenant, DAY)[()]["depositing_users"] > 0
    withdrawals = [
        r for r in generated(tenant, "transactions", DAY) if r["event_type"] == "withdraw"
    ]
    load(clickhouse, tenant, "transactions", DAY, withdrawals)
    _replay_all(clickhouse, tenant)
    assert gold_rows(clickhouse, "gold_users_daily", tenant, DAY) == {}  # no deposit, no row
    assert all(
        r["deposits_count"] == 0
        for r in gold_rows(clickhouse, "gold_transactions_daily", tenant, DAY).values()
    )


def test_another_tenants_rows_never_appear(clickhouse, make_tenant) -> None:
    ours, theirs = make_tenant(), make_tenant()
    load(clickhouse, theirs, "casino", DAY, generated(theirs, "casino", DAY, 200))
    load(clickhouse, theirs, "sportsbook", DAY, generated(theirs, "sportsbook", DAY, 200))
    _replay_all(clickhouse, theirs)
    # Nothing of ours is loaded: our replay must find nothing, whatever the other tenant holds.
    assert _replay_all(clickhouse, ours) == {name: (0, 0) for name in GOLD_TABLES}
    assert all(rows == {} for rows in _all_gold(clickhouse, ours).values())

    rows = generated(ours, "casino", DAY)
    load(clickhouse, ours, "casino", DAY, rows)
    _replay_all(clickhouse, ours)
    ggr = gold_rows(clickhouse, "gold_ggr_daily", ours, DAY)
    assert ggr == reference.ggr(ours, DAY)
    turnover = sum((r["amount"] for r in rows if r["event_type"] == "open"), Decimal(0))
    assert sum(r["turnover"] for r in ggr.values()) == turnover
    assert gold_rows(clickhouse, "gold_ggr_daily", theirs, DAY) == reference.ggr(theirs, DAY)
