-- Measured load throughput of completed days (validation, INSERT and checks), for plan estimates.
SELECT
    sum(source_rows) AS rows,
    sum(dateDiff('millisecond', started_at, updated_at)) / 1000 AS seconds,
    count() AS days
FROM atlas.backfill_log FINAL
WHERE status = 'completed'
  AND source_rows > 0
  AND ({domain:String} = '' OR domain = {domain:String})
