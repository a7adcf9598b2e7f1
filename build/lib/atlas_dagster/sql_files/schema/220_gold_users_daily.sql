-- Gold: user activity per tenant and UTC day.
-- ReplacingMergeTree(computed_at, is_deleted): replays tombstone vanished keys; read with FINAL.
CREATE TABLE IF NOT EXISTS atlas.gold_users_daily
(
    organization_id  LowCardinality(String),
    brand_id         LowCardinality(String),
    day              Date,
    registrations    UInt64,                   -- register events
    profile_updates  UInt64,                   -- update events
    depositing_users UInt64,                   -- distinct user_id with a deposit
    active_bettors   UInt64,                   -- distinct user_id with a casino or sportsbook open
    computed_at      DateTime64(6, 'UTC'),
    is_deleted       UInt8
)
ENGINE = ReplacingMergeTree(computed_at, is_deleted)
PARTITION BY toYYYYMM(day)
ORDER BY (organization_id, brand_id, day);
