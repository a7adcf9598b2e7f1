-- The newest status and message of one tenant-day: tells whether a 'failed' version was ours.
SELECT status, error_message
FROM atlas.backfill_log FINAL
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND domain = {domain:String}
  AND partition_date = {partition_date:Date}
