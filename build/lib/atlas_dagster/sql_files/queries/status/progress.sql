-- The monitoring guide's "progress per domain" query, with optional bound filters
-- ('' matches everything): organization, brand and domain.
SELECT
    organization_id,
    brand_id,
    domain,
    countIf(status = 'completed') AS days_done,
    countIf(status = 'failed')    AS days_failed,
    sumIf(rows_loaded, status = 'completed') AS total_rows,
    min(partition_date) AS first_day,
    max(partition_date) AS last_day,
    max(updated_at) AS last_activity
FROM atlas.backfill_log FINAL
WHERE ({organization_id:String} = '' OR organization_id = {organization_id:String})
  AND ({brand_id:String} = '' OR brand_id = {brand_id:String})
  AND ({domain:String} = '' OR domain = {domain:String})
GROUP BY organization_id, brand_id, domain
ORDER BY organization_id, brand_id, domain
