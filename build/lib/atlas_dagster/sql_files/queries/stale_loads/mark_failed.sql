-- A 'failed' version of one stale day, written only while its newest version is still the
-- 'running' one that was judged (same version): a day whose load logged a result meanwhile is
-- left alone. Everything but status, error_message and updated_at is copied; updated_at is
-- strictly later so that FINAL keeps this version.
INSERT INTO atlas.backfill_log
    (organization_id, brand_id, domain, partition_date, status, rows_loaded, source_rows, files,
     bytes, error_message, s3_path, query_id, run_id, attempt, started_at, updated_at, worker)
SELECT
    organization_id, brand_id, domain, partition_date, 'failed', rows_loaded, source_rows, files,
    bytes, {error_message:String}, s3_path, query_id, run_id, attempt, started_at,
    greatest(now64(6, 'UTC'), updated_at + toIntervalMicrosecond(1)), worker
FROM atlas.backfill_log FINAL
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND domain = {domain:String}
  AND partition_date = {partition_date:Date}
  AND status = 'running'
  AND toUnixTimestamp64Micro(updated_at) = {version:Int64}
