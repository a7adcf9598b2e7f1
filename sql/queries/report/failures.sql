-- Days whose newest state is 'failed', with the loader's diagnosis, for many tenants in one read;
-- newest first and at most {per_tenant:UInt32} per tenant (the counts come from summary.sql).
SELECT
    organization_id,
    brand_id,
    domain,
    partition_date,
    substring(error_message, 1, 4000) AS error_message,
    attempt,
    updated_at
FROM atlas.backfill_log FINAL
WHERE status = 'failed'
  AND organization_id IN {organization_ids:Array(String)}
  AND (organization_id, brand_id) IN (
      SELECT arrayJoin(arrayZip({organization_ids:Array(String)}, {brand_ids:Array(String)})))
  AND partition_date <= {last_day:Date}
ORDER BY organization_id, brand_id, partition_date DESC, domain
LIMIT {per_tenant:UInt32} BY organization_id, brand_id
