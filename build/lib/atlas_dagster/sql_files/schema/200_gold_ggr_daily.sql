-- Gold: gross gaming revenue per tenant, UTC day, vertical and currency (cash basis).
-- ReplacingMergeTree(computed_at, is_deleted) keyed by the grouping columns: each replay of a
-- tenant-day inserts its fresh rows plus is_deleted = 1 tombstones for keys that disappeared.
-- Always read with FINAL (FINAL drops the tombstoned keys).
CREATE TABLE IF NOT EXISTS atlas.gold_ggr_daily
(
    organization_id LowCardinality(String),
    brand_id        LowCardinality(String),
    day             Date,                      -- UTC day of event_timestamp
    vertical        LowCardinality(String),    -- 'casino' | 'sportsbook'
    currency        LowCardinality(String),
    bets            UInt64,                    -- open events
    turnover        Decimal(38, 4),            -- sum of open amounts (stakes)
    payouts         Decimal(38, 4),            -- sum of win and cashout amounts
    ggr             Decimal(38, 4),            -- turnover - payouts
    computed_at     DateTime64(6, 'UTC'),
    is_deleted      UInt8
)
ENGINE = ReplacingMergeTree(computed_at, is_deleted)
PARTITION BY toYYYYMM(day)
ORDER BY (organization_id, brand_id, day, vertical, currency);
