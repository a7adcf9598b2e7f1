-- The latest attempt number logged for one tenant-day (0 when it was never tried).
SELECT max(attempt) AS attempt
FROM atlas.backfill_log FINAL
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND domain = {domain:String}
  AND partition_date = {partition_date:Date}
