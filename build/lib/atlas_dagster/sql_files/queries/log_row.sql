-- The current state of one tenant-day in backfill_log (ReplacingMergeTree: read with FINAL).
SELECT status, rows_loaded, source_rows, duplicate_rows, files, error_message, s3_path, run_id,
       attempt, updated_at
FROM atlas.backfill_log FINAL
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND domain = {domain:String}
  AND partition_date = {partition_date:Date}
