"""Large deterministic export days for every domain, built column-wise with numpy and pyarrow."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from atlas_dagster.cli.demo_data import CURRENCIES, MONEY, arrow_table
from atlas_dagster.domains import DOMAINS
from atlas_dagster.exports.layout import day_folder
from atlas_dagster.tenants import Tenant

# Bump when the generated values change, so that reused days (marker files) are rewritten.
GENERATOR_VERSION = 1
MARKER = ".bulk-export"
DAY_MS = 86_400_000
USERS = 200_000
GAMES = 40
COUNTRIES = ("BR", "BR", "PT", None)
PAYMENT_METHODS = ("pix", "card", "boleto", None)
CASINO_WIN_MULTIPLIERS_X10 = (15, 20, 30, 100)  # payout = stake × 1.5, 2, 3 or 10
SPORTSBOOK_OUTCOMES = ("win", "lose", "cashout")
SPORTSBOOK_OUTCOME_WEIGHTS = (3, 5, 1)
SPORTSBOOK_UNSETTLED = 0.18  # share of a pair's second rows that open another bet instead
_U64 = np.uint64


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: uniform 64-bit words from consecutive integers, vectorised."""
    z = values + _U64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return z ^ (z >> _U64(31))


class _Draws:
    """Random values keyed by (seed, tenant, domain, day, field, row or bet index).

    Every value depends on its index only, never on how the day is split into files, so a day
    is the same rows whatever rows_per_file is, and a settlement row can re-derive its bet.
    """

    def __init__(self, seed: int, tenant: Tenant, domain: str, day: dt.date) -> None:
        words = np.frombuffer(f"{seed}|{tenant.key}|{domain}|{day}".encode(), dtype=np.uint8)
        key = _U64(seed) ^ _U64(day.toordinal())
        with np.errstate(over="ignore"):
            for byte in words:  # a short string: the only per-character loop, once per day
                key = _mix(np.array([key ^ _U64(byte)], dtype=_U64))[0]
        self._key = key

    def words(self, field: str, index: np.ndarray) -> np.ndarray:
        salt = _U64(int.from_bytes(field.encode()[:8].ljust(8, b"\0"), "little"))
        with np.errstate(over="ignore"):
            return _mix(_mix(index.astype(_U64) ^ self._key) ^ salt)

    def uniform(self, field: str, index: np.ndarray) -> np.ndarray:
        """Floats in [0, 1)."""
        return (self.words(field, index) >> _U64(11)).astype(np.float64) / float(1 << 53)

    def integers(self, field: str, index: np.ndarray, low: int, high: int) -> np.ndarray:
        """Integers in [low, high)."""
        return low + (self.words(field, index) % _U64(high - low)).astype(np.int64)

    def choice(self, field: str, index: np.ndarray, weights: Sequence[float]) -> np.ndarray:
        """Indices into `weights`, drawn with those relative weights."""
        edges = np.cumsum(np.asarray(weights, dtype=np.float64))
        return np.searchsorted(edges / edges[-1], self.uniform(field, index), side="right")


def _strings(prefix: str, numbers: np.ndarray, suffix: pa.Array | str = "") -> pa.Array:
    digits = pc.cast(pa.array(numbers), pa.string())
    return pc.binary_join_element_wise(prefix, digits, suffix, "")


def _pick(values: Sequence[str | None], picks: np.ndarray) -> pa.Array:
    return pa.array(list(values), type=pa.string()).take(pa.array(picks))


def _money(unscaled: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """decimal(18, 4) from its non-negative unscaled values (10⁻⁴ units), as int128 words."""
    n = len(unscaled)
    words = np.zeros((n, 2), dtype=np.int64)
    words[:, 0] = unscaled
    validity = None
    if valid is not None and not valid.all():
        validity = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    return pa.Array.from_buffers(MONEY, n, [validity, pa.py_buffer(words.tobytes())])


def _stamps(day: dt.date, milliseconds: np.ndarray) -> pa.Array:
    day_ms = int(dt.datetime.combine(day, dt.time(), dt.UTC).timestamp() * 1000)
    inside = np.clip(milliseconds, 0, DAY_MS - 1)  # the export's day is [00:00, 24:00) UTC
    return pa.array(day_ms + inside, type=pa.timestamp("ms", tz="UTC"))


def _common(
    tenant: Tenant, draws: _Draws, actor: np.ndarray, event_ids: pa.Array, event_types: pa.Array
) -> dict[str, pa.Array]:
    n = len(actor)
    return {
        "event_id": event_ids,
        "event_type": event_types,
        "organization_id": pa.repeat(tenant.organization_id, n).cast(pa.string()),
        "brand_id": pa.repeat(tenant.brand_id, n).cast(pa.string()),
        "user_id": _strings("u", draws.integers("user", actor, 0, USERS)),
    }


def _user(tenant: Tenant, day: dt.date, draws: _Draws, rows: np.ndarray) -> dict[str, pa.Array]:
    kinds = draws.choice("type", rows, (0.6, 0.4))
    columns = _common(
        tenant,
        draws,
        rows,
        _strings(f"usr-{day:%Y%m%d}-", rows),
        _pick(("register", "update"), kinds),
    )
    return columns | {
        "event_timestamp": _stamps(day, draws.integers("ts", rows, 0, DAY_MS)),
        "country": _pick(COUNTRIES, draws.integers("country", rows, 0, len(COUNTRIES))),
        # A missing currency is rare, but the column is nullable and loads must keep the nulls.
        "currency": _pick((*CURRENCIES, None), draws.choice("cur", rows, (*[1] * 5, 0.1))),
    }


def _casino(tenant: Tenant, day: dt.date, draws: _Draws, rows: np.ndarray) -> dict[str, pa.Array]:
    """Rows 2k and 2k+1 are bet k's open (amount = stake) and its win or lose (payout or 0)."""
    bet, settles = rows // 2, rows % 2 == 1
    opened_ms = draws.integers("ts", bet, 0, DAY_MS)
    settle_ms = opened_ms + draws.integers("wait", bet, 1_000, 120_000)
    won = draws.uniform("won", bet) < 0.45
    stake = draws.integers("stake", bet, 50, 20_000) * 100  # whole cents, in 10⁻⁴ units
    multiplier = np.asarray(CASINO_WIN_MULTIPLIERS_X10)[draws.integers("mult", bet, 0, 4)]
    amount = np.where(settles, np.where(won, stake * multiplier // 10, 0), stake)
    kind = np.where(settles, np.where(won, 1, 2), 0)
    columns = _common(
        tenant,
        draws,
        bet,
        _strings(f"cas-{day:%Y%m%d}-", bet, _pick(("-o", "-s"), settles.astype(np.int8))),
        _pick(("open", "win", "lose"), kind),
    )
    return columns | {
        "event_timestamp": _stamps(day, np.where(settles, settle_ms, opened_ms)),
        "bet_id": _strings(f"cb-{day:%Y%m%d}-", bet),
        "game_id": _strings("slot-", draws.integers("game", bet, 0, GAMES)),
        "amount": _money(amount),
        "currency": _pick(CURRENCIES, draws.integers("cur", bet, 0, len(CURRENCIES))),
    }


def _transactions(
    tenant: Tenant, day: dt.date, draws: _Draws, rows: np.ndarray
) -> dict[str, pa.Array]:
    kinds = draws.choice("type", rows, (0.7, 0.3))
    columns = _common(
        tenant,
        draws,
        rows,
        _strings(f"trx-{day:%Y%m%d}-", rows),
        _pick(("deposit", "withdraw"), kinds),
    )
    methods = draws.integers("method", rows, 0, len(PAYMENT_METHODS))
    return columns | {
        "event_timestamp": _stamps(day, draws.integers("ts", rows, 0, DAY_MS)),
        "transaction_id": _strings(f"t-{day:%Y%m%d}-", rows),
        "amount": _money(draws.integers("amount", rows, 1_000, 150_000) * 100),
        "currency": _pick(CURRENCIES, draws.integers("cur", rows, 0, len(CURRENCIES))),
        "payment_method": _pick(PAYMENT_METHODS, methods),
    }


def _sportsbook(
    tenant: Tenant, day: dt.date, draws: _Draws, rows: np.ndarray
) -> dict[str, pa.Array]:
    """Row 2k opens bet 2k; row 2k+1 settles it (win, lose, cashout) or opens bet 2k+1, and a
    bet left open has no settlement that day. Open rows carry potential_payout and odds,
    settlements carry neither."""
    pair = rows - rows % 2
    second = rows % 2 == 1
    settles = second & (draws.uniform("unsettled", pair) >= SPORTSBOOK_UNSETTLED)
    bet = np.where(settles, pair, rows)
    opened_ms = draws.integers("ts", bet, 0, DAY_MS)
    settle_ms = opened_ms + draws.integers("wait", bet, 60_000, 180 * 60_000)
    stake_cents = draws.integers("stake", bet, 100, 30_000)
    odds_hundredths = draws.integers("odds", bet, 120, 801)
    potential = stake_cents * odds_hundredths  # 10⁻² × 10⁻² = 10⁻⁴ units: exact at scale 4
    outcome = draws.choice("outcome", bet, SPORTSBOOK_OUTCOME_WEIGHTS)
    paid = np.choose(outcome, [potential, np.zeros_like(potential), stake_cents * 80])
    opens = ~settles
    event_types = _pick(("open", *SPORTSBOOK_OUTCOMES), np.where(settles, outcome + 1, 0))
    suffix = pc.binary_join_element_wise("-", event_types, "")
    columns = _common(tenant, draws, bet, _strings(f"sb-{day:%Y%m%d}-", bet, suffix), event_types)
    return columns | {
        "event_timestamp": _stamps(day, np.where(settles, settle_ms, opened_ms)),
        "bet_id": _strings(f"sb-{day:%Y%m%d}-", bet),
        "amount": _money(np.where(settles, paid, stake_cents * 100)),
        "potential_payout": _money(np.where(opens, potential, 0), valid=opens),
        "odds": pa.array(odds_hundredths / 100.0, mask=settles),
        "currency": _pick(CURRENCIES, draws.integers("cur", bet, 0, len(CURRENCIES))),
    }


Generator = Callable[[Tenant, dt.date, _Draws, np.ndarray], dict[str, pa.Array]]
BULK_GENERATORS: dict[str, Generator] = {
    "user": _user,
    "casino": _casino,
    "transactions": _transactions,
    "sportsbook": _sportsbook,
}


def bulk_table(
    tenant: Tenant, domain: str, day: dt.date, lo: int, hi: int, seed: int = 42
) -> pa.Table:
    """Rows lo..hi of the tenant-day's export, with the export contract's schema."""
    if domain not in BULK_GENERATORS:
        raise ValueError(f"unknown domain {domain!r}; expected one of {sorted(DOMAINS)}")
    schema = arrow_table(domain, []).schema
    rows = np.arange(lo, hi, dtype=np.int64)
    columns = BULK_GENERATORS[domain](tenant, day, _Draws(seed, tenant, domain, day), rows)
    return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


def _folder(tenant: Tenant, domain: str, day: dt.date) -> Path:
    uri = day_folder(tenant, domain, day)
    if not uri.startswith("file://"):
        raise ValueError(f"bulk exports are written to a file:// source, not {tenant.source}")
    return Path(uri[len("file://") :])


def _marker_text(rows: int, rows_per_file: int, seed: int) -> str:
    return f"v{GENERATOR_VERSION} rows={rows} rows_per_file={rows_per_file} seed={seed}"


def is_current(
    tenant: Tenant, domain: str, day: dt.date, rows: int, rows_per_file: int, seed: int = 42
) -> bool:
    """Whether the day folder already holds exactly this bulk day (its marker file says so)."""
    marker = _folder(tenant, domain, day) / MARKER
    return marker.exists() and marker.read_text() == _marker_text(rows, rows_per_file, seed)


def write_bulk_day(
    tenant: Tenant,
    domain: str,
    day: dt.date,
    rows: int,
    rows_per_file: int = 250_000,
    seed: int = 42,
) -> Path:
    """Writes the tenant-day as ceil(rows / rows_per_file) Parquet files; returns the folder.

    Earlier Parquet files of the day are removed first; a marker file (ignored by the listing,
    which takes *.parquet only) records what was written, for `is_current`.
    """
    if rows < 1 or rows_per_file < 1:
        raise ValueError("rows and rows_per_file must be positive")
    folder = _folder(tenant, domain, day)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).unlink(missing_ok=True)
    for stale in folder.glob("*.parquet"):
        stale.unlink()
    for index, lo in enumerate(range(0, rows, rows_per_file)):
        table = bulk_table(tenant, domain, day, lo, min(rows, lo + rows_per_file), seed)
        pq.write_table(table, folder / f"part-{index:05d}.parquet")
    (folder / MARKER).write_text(_marker_text(rows, rows_per_file, seed))
    return folder


def ensure_bulk_day(
    tenant: Tenant,
    domain: str,
    day: dt.date,
    rows: int,
    rows_per_file: int = 250_000,
    seed: int = 42,
) -> tuple[Path, bool]:
    """(folder, reused): writes the day unless its marker says it is already there."""
    if is_current(tenant, domain, day, rows, rows_per_file, seed):
        return _folder(tenant, domain, day), True
    return write_bulk_day(tenant, domain, day, rows, rows_per_file, seed), False
