-- The newest state of each logged day of one tenant inside a window: gaps and the progress chart
-- are the window's days minus these.
SELECT domain, partition_date, status, rows_loaded
FROM atlas.backfill_log FINAL
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND partition_date BETWEEN {first_day:Date} AND {last_day:Date}
ORDER BY domain, partition_date
