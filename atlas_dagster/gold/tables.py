"""The gold registry: each gold table, the raw domains it is computed from and its metrics."""

from __future__ import annotations

from dataclasses import dataclass

from atlas_dagster.domains import DOMAINS
from atlas_dagster.settings import IDENTIFIER_RE


@dataclass(frozen=True)
class GoldTable:
    name: str  # atlas.<name>, also the asset key
    sources: tuple[str, ...]  # raw domains it reads
    metrics: tuple[str, ...]  # value columns, summed into each replay's metadata
    description: str
    # Reads a lookback window of raw days ending on the partition's day instead of that day.
    windowed: bool = False

    @property
    def replay_query(self) -> str:
        return f"{self.name}_replay"

    @property
    def reconcile_query(self) -> str:
        return f"{self.name}_reconcile"

    def source_tables(self) -> dict[str, str]:
        """The queries' $<domain>_table placeholders, named from the domain registry."""
        return {f"{d}_table": identifier(DOMAINS[d].raw_table) for d in self.sources}


def identifier(name: str) -> str:
    """Only validated identifiers reach a query's dollar placeholders."""
    if not IDENTIFIER_RE.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid ClickHouse identifier")
    return name


GOLD_TABLES: dict[str, GoldTable] = {
    t.name: t
    for t in (
        GoldTable(
            "gold_ggr_daily",
            ("casino", "sportsbook"),
            ("bets", "turnover", "payouts", "ggr"),
            "Gross gaming revenue per UTC day, vertical and currency, on a cash basis: "
            "bets and turnover from opens, payouts from wins and cashouts, ggr = turnover - "
            "payouts.",
        ),
        GoldTable(
            "gold_transactions_daily",
            ("transactions",),
            (
                "deposits_count",
                "deposits_amount",
                "withdrawals_count",
                "withdrawals_amount",
                "net_deposits",
            ),
            "Deposits and withdrawals per UTC day and currency; net_deposits = deposits_amount "
            "- withdrawals_amount.",
        ),
        GoldTable(
            "gold_users_daily",
            ("user", "transactions", "casino", "sportsbook"),
            ("registrations", "profile_updates", "depositing_users", "active_bettors"),
            "Registrations, profile updates, distinct depositing users and distinct active "
            "bettors (casino or sportsbook opens) per UTC day.",
        ),
        GoldTable(
            "gold_sportsbook_liability_daily",
            ("sportsbook",),
            ("open_bets", "liability"),
            "Open sportsbook exposure at the end of each UTC day per currency: bets opened in "
            "the lookback window and not settled (win, lose, cashout) by the end of the day, "
            "and the sum of their potential_payout.",
            windowed=True,
        ),
    )
}
