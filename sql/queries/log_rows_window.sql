-- The current state of each logged day of one tenant and domain inside a window (FINAL): what
-- verify reads once for the window instead of once per day.
SELECT partition_date, status, rows_loaded, source_rows, duplicate_rows, files, error_message,
       s3_path, run_id, attempt, updated_at
FROM atlas.backfill_log FINAL
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND domain = {domain:String}
  AND partition_date BETWEEN {first_day:Date} AND {last_day:Date}
