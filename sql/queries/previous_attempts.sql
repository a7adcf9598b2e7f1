-- The latest attempt number and state logged for each of a tenant's (domain, day) pairs, read once
-- for all the days of a run instead of once per day (days never tried are absent: attempt 0).
-- FINAL leaves one row per pair: its status is the day's current state.
SELECT domain, partition_date, max(attempt) AS attempt, any(status) AS status
FROM atlas.backfill_log FINAL
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND domain IN {domains:Array(String)}
  AND partition_date IN {dates:Array(Date)}
GROUP BY domain, partition_date
