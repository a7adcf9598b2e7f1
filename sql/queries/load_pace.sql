-- The most recent completed loads with rows (one domain, or all with ''), for the measured pace:
-- rows per second per load, and how many loads ran at once (monitoring/pace.py).
SELECT source_rows, started_at, updated_at
FROM atlas.backfill_log FINAL
WHERE status = 'completed'
  AND source_rows > 0
  AND updated_at > started_at
  AND ({domain:String} = '' OR domain = {domain:String})
ORDER BY updated_at DESC
LIMIT {recent:UInt32}
