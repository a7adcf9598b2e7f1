-- Days whose newest state is 'running', with optional bound filters ('' matches everything).
-- version (updated_at in microseconds) names the exact row version that gets judged.
SELECT
    organization_id,
    brand_id,
    domain,
    partition_date,
    run_id,
    attempt,
    worker,
    s3_path,
    started_at,
    updated_at,
    toUnixTimestamp64Micro(updated_at) AS version
FROM atlas.backfill_log FINAL
WHERE status = 'running'
  AND ({organization_id:String} = '' OR organization_id = {organization_id:String})
  AND ({brand_id:String} = '' OR brand_id = {brand_id:String})
  AND ({domain:String} = '' OR domain = {domain:String})
  AND ({run_id:String} = '' OR run_id = {run_id:String})
ORDER BY organization_id, brand_id, partition_date, domain
