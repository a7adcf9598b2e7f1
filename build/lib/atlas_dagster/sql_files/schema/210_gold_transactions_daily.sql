-- Gold: deposits and withdrawals per tenant, UTC day and currency.
-- ReplacingMergeTree(computed_at, is_deleted): replays tombstone vanished keys; read with FINAL.
CREATE TABLE IF NOT EXISTS atlas.gold_transactions_daily
(
    organization_id    LowCardinality(String),
    brand_id           LowCardinality(String),
    day                Date,
    currency           LowCardinality(String),
    deposits_count     UInt64,
    deposits_amount    Decimal(38, 4),
    withdrawals_count  UInt64,
    withdrawals_amount Decimal(38, 4),
    net_deposits       Decimal(38, 4),         -- deposits_amount - withdrawals_amount
    computed_at        DateTime64(6, 'UTC'),
    is_deleted         UInt8
)
ENGINE = ReplacingMergeTree(computed_at, is_deleted)
PARTITION BY toYYYYMM(day)
ORDER BY (organization_id, brand_id, day, currency);
