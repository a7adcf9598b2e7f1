-- casino domain: export contract → Null inbound → bridge MV → tbt_raw_events_casino.
CREATE TABLE IF NOT EXISTS atlas.casino_events_inbound
(
    event_id        String,
    event_type      String,
    event_timestamp DateTime64(6, 'UTC'),
    organization_id String,
    brand_id        String,
    user_id         String,
    bet_id          String,
    game_id         String,
    amount          Decimal(18, 4),
    currency        String,
    source_file     String
)
ENGINE = Null;

CREATE TABLE IF NOT EXISTS atlas.tbt_raw_events_casino
(
    organization_id LowCardinality(String),
    brand_id        LowCardinality(String),
    event_date      Date,
    event_id        String,
    event_type      LowCardinality(String),
    event_timestamp DateTime64(6, 'UTC'),
    user_id         String,
    bet_id          String,
    game_id         LowCardinality(String),
    amount          Decimal(18, 4),
    currency        LowCardinality(String),
    source_file     String,
    ingestion_path  LowCardinality(String),
    ingested_at     DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(event_date)
ORDER BY (organization_id, brand_id, event_date, event_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS atlas.casino_events_bridge_mv TO atlas.tbt_raw_events_casino AS
SELECT
    organization_id,
    brand_id,
    toDate(event_timestamp) AS event_date,
    event_id,
    lower(trim(event_type)) AS event_type,
    event_timestamp,
    user_id,
    bet_id,
    game_id,
    amount,
    upper(currency) AS currency,
    source_file,
    'backfill' AS ingestion_path,
    now64(6) AS ingested_at
FROM atlas.casino_events_inbound;
