"""Deterministic synthetic exports for the demo tenant, laid out as the export contract says."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from atlas_dagster.domains import DOMAINS
from atlas_dagster.exports.layout import day_folder
from atlas_dagster.tenants import Tenant

MONEY = pa.decimal128(18, 4)
CURRENCIES = ("BRL", "BRL", "BRL", "USD", "EUR")


def _stamp(rng: random.Random, day: dt.date) -> dt.datetime:
    start = dt.datetime.combine(day, dt.time(), dt.UTC)
    return start + dt.timedelta(microseconds=rng.randrange(86_400_000) * 1000)


def _money(rng: random.Random, low: float, high: float) -> Decimal:
    return Decimal(f"{rng.uniform(low, high):.2f}")


def _common(tenant: Tenant, event_id: str, event_type: str, ts: dt.datetime, user: str) -> dict:
    return {
        "event_id": event_id,
        "event_type": event_type,
        "event_timestamp": ts,
        "organization_id": tenant.organization_id,
        "brand_id": tenant.brand_id,
        "user_id": user,
    }


def _users(rng: random.Random, tenant: Tenant, day: dt.date, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        kind = "register" if rng.random() < 0.6 else "update"
        row = _common(
            tenant, f"usr-{day:%Y%m%d}-{i}", kind, _stamp(rng, day), f"u{rng.randrange(5000)}"
        )
        row |= {"country": rng.choice(["BR", "BR", "PT", None]), "currency": rng.choice(CURRENCIES)}
        rows.append(row)
    return rows


def _casino(rng: random.Random, tenant: Tenant, day: dt.date, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        ts, user, stake = _stamp(rng, day), f"u{rng.randrange(5000)}", _money(rng, 0.5, 200)
        base = {
            "bet_id": f"cb-{day:%Y%m%d}-{i}",
            "game_id": f"slot-{rng.randrange(40)}",
            "currency": rng.choice(CURRENCIES),
        }
        rows.append(
            _common(tenant, f"cas-{day:%Y%m%d}-{i}-o", "open", ts, user) | base | {"amount": stake}
        )
        # 40% of spins win 2.4x on average: a 96% return to player, a 4% house edge.
        won = rng.random() < 0.40
        settle = min(
            ts + dt.timedelta(seconds=rng.randrange(1, 120)),
            dt.datetime.combine(day, dt.time(23, 59, 59, 999000), dt.UTC),
        )
        payout = (stake * Decimal(rng.choice(["1.5", "2", "2.5", "3.6"]))) if won else Decimal("0")
        rows.append(
            _common(tenant, f"cas-{day:%Y%m%d}-{i}-s", "win" if won else "lose", settle, user)
            | base
            | {"amount": payout.quantize(Decimal("0.0001"))}
        )
    return rows


def _transactions(rng: random.Random, tenant: Tenant, day: dt.date, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        kind = "deposit" if rng.random() < 0.7 else "withdraw"
        rows.append(
            _common(
                tenant, f"trx-{day:%Y%m%d}-{i}", kind, _stamp(rng, day), f"u{rng.randrange(5000)}"
            )
            | {
                "transaction_id": f"t-{day:%Y%m%d}-{i}",
                "amount": _money(rng, 10, 1500),
                "currency": rng.choice(CURRENCIES),
                "payment_method": rng.choice(["pix", "card", "boleto", None]),
            }
        )
    return rows


def _sportsbook(rng: random.Random, tenant: Tenant, day: dt.date, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        ts, user, stake = _stamp(rng, day), f"u{rng.randrange(5000)}", _money(rng, 1, 300)
        odds = round(rng.uniform(1.2, 8.0), 2)
        potential = (stake * Decimal(str(odds))).quantize(Decimal("0.0001"))
        base = {"bet_id": f"sb-{day:%Y%m%d}-{i}", "currency": rng.choice(CURRENCIES)}
        rows.append(
            _common(tenant, f"sb-{day:%Y%m%d}-{i}-o", "open", ts, user)
            | base
            | {"amount": stake, "potential_payout": potential, "odds": odds}
        )
        # A bookmaker's margin: a bet at these odds wins with probability 0.93 / odds.
        settled = rng.random()
        if settled < 0.15:  # still open at the end of the day
            continue
        if settled < 0.25:
            outcome = "cashout"
        else:
            outcome = "win" if rng.random() < 0.93 / odds else "lose"
        amount = {
            "win": potential,
            "lose": Decimal("0"),
            "cashout": (stake * Decimal("0.8")).quantize(Decimal("0.0001")),
        }[outcome]
        settle = min(
            ts + dt.timedelta(minutes=rng.randrange(1, 180)),
            dt.datetime.combine(day, dt.time(23, 59, 59, 999000), dt.UTC),
        )
        rows.append(
            _common(tenant, f"sb-{day:%Y%m%d}-{i}-{outcome}", outcome, settle, user)
            | base
            | {"amount": amount, "potential_payout": None, "odds": None}
        )
    return rows


GENERATORS = {
    "user": (_users, 150),
    "casino": (_casino, 1500),
    "transactions": (_transactions, 400),
    "sportsbook": (_sportsbook, 600),
}


def arrow_table(domain: str, rows: list[dict]) -> pa.Table:
    fields = [
        pa.field("event_id", pa.string()),
        pa.field("event_type", pa.string()),
        pa.field("event_timestamp", pa.timestamp("ms", tz="UTC")),
        pa.field("organization_id", pa.string()),
        pa.field("brand_id", pa.string()),
        pa.field("user_id", pa.string()),
    ]
    for column in DOMAINS[domain].extra_columns:
        arrow_type = {"money": MONEY, "double": pa.float64()}.get(column.kind.value, pa.string())
        fields.append(pa.field(column.name, arrow_type))
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


def write_day(tenant: Tenant, domain: str, day: dt.date, rows: list[dict], files: int = 2) -> Path:
    folder = Path(day_folder(tenant, domain, day)[len("file://") :])
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.parquet"):
        stale.unlink()
    table = arrow_table(domain, rows)
    chunk = -(-len(rows) // files)
    for index in range(files):
        pq.write_table(table.slice(index * chunk, chunk), folder / f"part-{index:05d}.parquet")
    return folder


def write_demo_exports(tenant: Tenant, seed: int = 42) -> int:
    """Writes every day and domain of the tenant's window; returns the number of rows."""
    total = 0
    day = tenant.start_date
    while day <= tenant.last_date():
        for domain in tenant.domains:
            generate, volume = GENERATORS[domain]
            rng = random.Random(f"{seed}-{tenant.key}-{domain}-{day}")
            rows = generate(rng, tenant, day, volume)
            write_day(tenant, domain, day, rows)
            total += len(rows)
        day += dt.timedelta(days=1)
    return total
