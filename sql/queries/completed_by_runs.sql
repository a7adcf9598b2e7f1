-- The (domain, day) pairs of one tenant whose current state (FINAL: the newest version) is
-- 'completed' by one of the given runs: what earlier attempts of a retried run already loaded.
SELECT domain, partition_date, run_id
FROM atlas.backfill_log FINAL
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND domain IN {domains:Array(String)}
  AND partition_date IN {dates:Array(Date)}
  AND status = 'completed'
  AND run_id IN {run_ids:Array(String)}
