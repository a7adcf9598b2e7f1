-- Each domain's most recent completed loads with rows, in one read for several domains: the
-- measured pace per domain (monitoring/pace.py), as load_pace.sql reads it for one.
SELECT domain, source_rows, started_at, updated_at
FROM atlas.backfill_log FINAL
WHERE status = 'completed'
  AND source_rows > 0
  AND updated_at > started_at
  AND has({domains:Array(String)}, domain)
ORDER BY updated_at DESC
LIMIT {recent:UInt32} BY domain
