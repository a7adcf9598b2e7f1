-- Gold: open sportsbook exposure at the end of each UTC day, per tenant and currency.
-- ReplacingMergeTree(computed_at, is_deleted): replays tombstone vanished keys; read with FINAL.
CREATE TABLE IF NOT EXISTS atlas.gold_sportsbook_liability_daily
(
    organization_id LowCardinality(String),
    brand_id        LowCardinality(String),
    day             Date,                      -- exposure at day + 1 00:00:00 UTC
    currency        LowCardinality(String),
    open_bets       UInt64,                    -- bets opened in the lookback window, unsettled
    liability       Decimal(38, 4),            -- sum of their potential_payout
    lookback_days   UInt16,                    -- the window the row was computed with
    computed_at     DateTime64(6, 'UTC'),
    is_deleted      UInt8
)
ENGINE = ReplacingMergeTree(computed_at, is_deleted)
PARTITION BY toYYYYMM(day)
ORDER BY (organization_id, brand_id, day, currency);
