"""Every gold metric against pyarrow over the same exports, with hand-made edge rows, on chDB."""

import datetime as dt
from decimal import Decimal

import pytest

from atlas_dagster.gold.replay import reconcile_day, replay_day
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.tenants import Tenant
from testkit import gold_reference as reference
from testkit.gold_support import generated, gold_rows, load

pytestmark = pytest.mark.slow  # seconds per test: real loads and runs

D2, D1, D, D_NEXT = (dt.date(2026, 11, 3 + i) for i in range(4))
LOOKBACK = 3
EDGE = "CHF"  # the generator never uses it, so the CHF rows are the hand-made edge rows alone


def at(day: dt.date, *hms_ms: int) -> dt.datetime:
    hour, minute, second, ms = (*hms_ms, 0, 0, 0, 0)[:4]
    return dt.datetime.combine(day, dt.time(hour, minute, second, ms * 1000), dt.UTC)


def row(tenant, event_id: str, event_type: str, ts: dt.datetime, user: str, **extra) -> dict:
    common = {
        "event_id": event_id,
        "event_type": event_type,
        "event_timestamp": ts,
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "user_id": user,
    }
    return common | extra


def casino(tenant, event_id, event_type, ts, bet_id, amount, currency=EDGE) -> dict:
    extra = {"bet_id": bet_id, "game_id": "slot-edge", "amount": Decimal(amount)}
    return row(tenant, event_id, event_type, ts, "u-edge-c", currency=currency, **extra)


def sportsbook(tenant, event_id, event_type, ts, bet_id, amount, potential=None) -> dict:
    extra = {
        "bet_id": bet_id,
        "amount": Decimal(amount),
        "potential_payout": None if potential is None else Decimal(potential),
        "odds": None,
        "currency": EDGE,
    }
    return row(tenant, event_id, event_type, ts, "u-edge-s", **extra)


def transaction(tenant, event_id, event_type, ts, amount, currency=EDGE) -> dict:
    extra = {"transaction_id": event_id, "amount": Decimal(amount), "payment_method": None}
    return row(tenant, event_id, event_type, ts, "u-edge-t", currency=currency, **extra)


def casino_edges(tenant) -> dict[dt.date, list[dict]]:
    midnight_open = casino(tenant, "c-mid-o", " Open ", at(D), "c-mid", "10.0001", "chf")
    return {
        D1: [casino(tenant, "c-x-o", "open", at(D1, 23), "c-x", "20")],
        D: [
            midnight_open,
            casino(tenant, "c-late-o", "open", at(D, 23, 59, 59, 999), "c-late", "5.5"),
            casino(tenant, "c-x-w", "win", at(D), "c-x", "60"),  # opened the day before
            casino(tenant, "c-l", "lose", at(D, 9), "c-late", "0"),
            dict(midnight_open),  # the same event delivered twice
        ],
        D_NEXT: [casino(tenant, "c-next-o", "open", at(D_NEXT), "c-next", "7")],
    }


def sportsbook_edges(tenant) -> dict[dt.date, list[dict]]:
    opened_c = sportsbook(tenant, "s-c-o", "open", at(D, 13), "s-c", "30", "90")
    return {
        D2: [sportsbook(tenant, "s-a-o", "open", at(D2, 10), "s-a", "10", "35.5")],  # never settled
        D1: [sportsbook(tenant, "s-b-o", "open", at(D1, 12), "s-b", "20", "50")],
        D: [
            sportsbook(tenant, "s-b-w", "win", at(D, 8), "s-b", "50"),
            opened_c,
            sportsbook(tenant, "s-d-o", "open", at(D, 14), "s-d", "5"),  # no potential_payout
            sportsbook(tenant, "s-g-o", "open", at(D, 16), "s-g", "12", "30"),
            sportsbook(tenant, "s-g-l", "lose", at(D, 17), "s-g", "0"),
            sportsbook(tenant, "s-h-w", "win", at(D, 18), "s-old", "40"),  # its open is not loaded
            dict(opened_c),
        ],
        D_NEXT: [
            sportsbook(tenant, "s-c-c", "cashout", at(D_NEXT), "s-c", "24"),  # exactly midnight
            sportsbook(tenant, "s-e-o", "open", at(D_NEXT), "s-e", "8", "16"),
        ],
    }


def transaction_edges(tenant) -> dict[dt.date, list[dict]]:
    midnight_deposit = transaction(tenant, "t-mid", " DEPOSIT ", at(D), "100.0001", "chf")
    return {
        D: [
            midnight_deposit,
            transaction(tenant, "t-late", "withdraw", at(D, 23, 59, 59, 999), "50"),
            dict(midnight_deposit),
        ],
        D_NEXT: [transaction(tenant, "t-next", "deposit", at(D_NEXT), "70")],
    }


def user_edges(tenant) -> dict[dt.date, list[dict]]:
    register = row(tenant, "r-mid", "register", at(D), "u-new", country="CH", currency="chf")
    update = row(
        tenant, "r-late", "UPDATE", at(D, 23, 59, 59, 999), "u-new", country=None, currency=None
    )
    return {D: [register, update, dict(register)]}


EDGES = {
    "casino": casino_edges,
    "sportsbook": sportsbook_edges,
    "transactions": transaction_edges,
    "user": user_edges,
}


@pytest.fixture(scope="module")
def loaded(chdb_dsn, tmp_path_factory):
    """One tenant: generated rows plus edge rows on D1, D, D_NEXT, and sportsbook alone on D2."""
    clickhouse = ClickHouseResource(dsn=chdb_dsn)
    exports = tmp_path_factory.mktemp("gold-metrics")
    tenant = Tenant("goldmetrics", "main", f"file://{exports}", D2, D_NEXT, tuple(EDGES))
    for domain, edges in EDGES.items():
        edge_rows = edges(tenant)
        days = [D2, D1, D, D_NEXT] if domain == "sportsbook" else [D1, D, D_NEXT]
        for day in days:
            load(
                clickhouse,
                tenant,
                domain,
                day,
                generated(tenant, domain, day) + edge_rows.get(day, []),
            )
    with clickhouse.session() as client:
        ensure_schema(client)
        for day in (D2, D1, D, D_NEXT):
            for table in GOLD_TABLES.values():
                replay_day(client, table, tenant, day, LOOKBACK)
    return clickhouse, tenant


EXPECTED = {
    "gold_ggr_daily": lambda tenant, day: reference.ggr(tenant, day),
    "gold_transactions_daily": lambda tenant, day: reference.transactions(tenant, day),
    "gold_users_daily": lambda tenant, day: reference.users(tenant, day),
    "gold_sportsbook_liability_daily": lambda tenant, day: reference.liability(
        tenant, day, LOOKBACK
    ),
}


@pytest.mark.parametrize("table", sorted(GOLD_TABLES))
@pytest.mark.parametrize("day", [D2, D1, D, D_NEXT], ids=str)
def test_gold_equals_pyarrow_over_the_exports(loaded, table, day) -> None:
    clickhouse, tenant = loaded
    expected = EXPECTED[table](tenant, day)
    nothing_loaded = table == "gold_transactions_daily" and day == D2
    assert bool(expected) != nothing_loaded, "the reference must have something to compare"
    assert gold_rows(clickhouse, table, tenant, day) == expected


@pytest.mark.parametrize("table", sorted(GOLD_TABLES))
def test_reconciliation_check_passes_on_correct_gold(loaded, table) -> None:
    clickhouse, tenant = loaded
    with clickhouse.session() as client:
        for day in (D2, D1, D, D_NEXT):
            reconciliation = reconcile_day(client, GOLD_TABLES[table], tenant, day, LOOKBACK)
            assert reconciliation.passed, (day, reconciliation)


def test_ggr_is_cash_basis_with_half_open_days(loaded) -> None:
    """Midnight opens count on the new day, duplicates once, payouts on the day they are paid."""
    clickhouse, tenant = loaded
    ggr = {day: gold_rows(clickhouse, "gold_ggr_daily", tenant, day) for day in (D2, D1, D, D_NEXT)}
    casino_d = ggr[D][("casino", EDGE)]
    assert casino_d == {
        "bets": 2,
        "turnover": Decimal("15.5001"),
        "payouts": Decimal("60"),
        "ggr": Decimal("-44.4999"),
    }
    assert ggr[D1][("casino", EDGE)]["turnover"] == Decimal("20")
    assert ggr[D_NEXT][("casino", EDGE)]["bets"] == 1
    sportsbook_d = ggr[D][("sportsbook", EDGE)]
    assert sportsbook_d == {
        "bets": 3,
        "turnover": Decimal("47"),
        "payouts": Decimal("90"),  # win of a bet opened on D1 + win whose open is not loaded
        "ggr": Decimal("-43"),
    }
    assert ggr[D_NEXT][("sportsbook", EDGE)]["payouts"] == Decimal("24")  # the midnight cashout


def test_liability_window_and_settlement_boundaries(loaded) -> None:
    clickhouse, tenant = loaded
    liability = {
        day: gold_rows(clickhouse, "gold_sportsbook_liability_daily", tenant, day)[(EDGE,)]
        for day in (D2, D1, D, D_NEXT)
    }
    assert liability[D2] == {"open_bets": 1, "liability": Decimal("35.5")}
    assert liability[D1] == {"open_bets": 2, "liability": Decimal("85.5")}
    # s-b won and s-g lost on D; s-c is cashed out only at D_NEXT 00:00; s-d has no payout.
    assert liability[D] == {"open_bets": 3, "liability": Decimal("125.5")}
    # s-a (opened D2) is outside D_NEXT's 3-day window; s-e opened at D_NEXT 00:00.
    assert liability[D_NEXT] == {"open_bets": 2, "liability": Decimal("16")}


def test_transactions_and_users_edges(loaded) -> None:
    clickhouse, tenant = loaded
    assert gold_rows(clickhouse, "gold_transactions_daily", tenant, D)[(EDGE,)] == {
        "deposits_count": 1,
        "deposits_amount": Decimal("100.0001"),
        "withdrawals_count": 1,
        "withdrawals_amount": Decimal("50"),
        "net_deposits": Decimal("50.0001"),
    }
    assert (
        gold_rows(clickhouse, "gold_transactions_daily", tenant, D_NEXT)[(EDGE,)]["deposits_count"]
        == 1
    )
    generated_registers = sum(r["event_type"] == "register" for r in generated(tenant, "user", D))
    users = gold_rows(clickhouse, "gold_users_daily", tenant, D)[()]
    assert users["registrations"] == generated_registers + 1
