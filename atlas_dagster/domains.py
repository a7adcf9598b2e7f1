"""The domain registry: events, export columns, types and table names of every backfill domain."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from dagster import AssetKey


class Kind(Enum):
    """Logical type of an export column, as the export contract states it."""

    STRING = "string"
    # An identifier: a string, or an integer as warehouses unload their keys (INT32, INT64,
    # DECIMAL(p, 0)); stored as text, an integer as its exact decimal digits.
    ID = "id"
    TIMESTAMP = "timestamp"
    MONEY = "money"  # decimal with scale <= 4, or double
    DOUBLE = "double"


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    nullable: bool = False


COMMON_COLUMNS: tuple[Column, ...] = (
    Column("event_id", Kind.ID),
    Column("event_type", Kind.STRING),
    Column("event_timestamp", Kind.TIMESTAMP),
    Column("organization_id", Kind.ID),
    Column("brand_id", Kind.ID),
    Column("user_id", Kind.ID),
)


@dataclass(frozen=True)
class Domain:
    name: str
    event_types: tuple[str, ...]
    extra_columns: tuple[Column, ...]

    @property
    def columns(self) -> tuple[Column, ...]:
        return COMMON_COLUMNS + self.extra_columns

    @property
    def inbound_table(self) -> str:
        return f"{self.name}_events_inbound"

    @property
    def bridge_view(self) -> str:
        return f"{self.name}_events_bridge_mv"

    @property
    def raw_table(self) -> str:
        return f"tbt_raw_events_{self.name}"


DOMAINS: dict[str, Domain] = {
    d.name: d
    for d in (
        Domain(
            "user",
            ("register", "update"),
            (Column("country", Kind.STRING, True), Column("currency", Kind.STRING, True)),
        ),
        Domain(
            "casino",
            ("open", "win", "lose"),
            (
                Column("bet_id", Kind.ID),
                Column("game_id", Kind.ID),
                Column("amount", Kind.MONEY),
                Column("currency", Kind.STRING),
            ),
        ),
        Domain(
            "transactions",
            ("deposit", "withdraw"),
            (
                Column("transaction_id", Kind.ID),
                Column("amount", Kind.MONEY),
                Column("currency", Kind.STRING),
                Column("payment_method", Kind.STRING, True),
            ),
        ),
        Domain(
            "sportsbook",
            ("open", "win", "lose", "cashout"),
            (
                Column("bet_id", Kind.ID),
                Column("amount", Kind.MONEY),
                Column("potential_payout", Kind.MONEY, True),
                Column("odds", Kind.DOUBLE, True),
                Column("currency", Kind.STRING),
            ),
        ),
    )
}

# Scores are computed by the scoring worker from real events; they are never backfilled.
REFUSED_DOMAINS: dict[str, str] = {
    "user-score": "user-score is not a backfill domain: scores come from the scoring worker, "
    "computed from real events; re-process the original events instead",
}


def get_domain(name: str) -> Domain:
    if name in DOMAINS:
        return DOMAINS[name]
    if name in REFUSED_DOMAINS:
        raise ValueError(REFUSED_DOMAINS[name])
    raise ValueError(f"unknown domain {name!r}; expected one of {sorted(DOMAINS)}")


# The raw assets, one per domain (their keys are the raw tables' names).
RAW_ASSET_KEYS = frozenset(AssetKey(d.raw_table) for d in DOMAINS.values())
