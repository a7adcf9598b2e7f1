-- One row per (tenant, domain, day); every state change writes a new version.
-- ReplacingMergeTree(updated_at): always read with FINAL.
CREATE TABLE IF NOT EXISTS atlas.backfill_log
(
    organization_id LowCardinality(String),
    brand_id        LowCardinality(String),
    domain          LowCardinality(String),
    partition_date  Date,
    status          LowCardinality(String),   -- 'running' | 'completed' | 'failed'
    rows_loaded     UInt64,                    -- distinct events in tbt_raw_events_<domain>
    source_rows     UInt64,                    -- rows in the day's Parquet files (footers)
    files           UInt32,
    bytes           UInt64,
    error_message   String,
    s3_path         String,
    query_id        String,
    run_id          String,
    attempt         UInt32,
    started_at      DateTime64(6, 'UTC'),
    updated_at      DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (organization_id, brand_id, domain, partition_date);
