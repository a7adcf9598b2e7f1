-- The monitoring guide's "pending failures": days whose newest state is 'failed', with optional
-- bound filters ('' matches everything).
SELECT
    organization_id,
    brand_id,
    domain,
    partition_date,
    error_message,
    s3_path,
    run_id,
    attempt,
    updated_at
FROM atlas.backfill_log FINAL
WHERE status = 'failed'
  AND ({organization_id:String} = '' OR organization_id = {organization_id:String})
  AND ({brand_id:String} = '' OR brand_id = {brand_id:String})
  AND ({domain:String} = '' OR domain = {domain:String})
ORDER BY organization_id, brand_id, partition_date, domain
