-- The client report's figures per tenant and domain, for many tenants in one read (the tenants
-- come as bound arrays, one element per tenant): the newest state of each day (FINAL), counted.
SELECT
    organization_id,
    brand_id,
    domain,
    countIf(status = 'completed') AS days_done,
    countIf(status = 'failed') AS days_failed,
    countIf(status = 'running') AS days_running,
    sumIf(rows_loaded, status = 'completed') AS rows_loaded,
    sumIf(source_rows, status = 'completed') AS source_rows,
    minIf(partition_date, status = 'completed') AS first_done,
    maxIf(partition_date, status = 'completed') AS last_done,
    max(updated_at) AS last_activity
FROM atlas.backfill_log FINAL
WHERE has({organization_ids:Array(String)}, organization_id)
  AND has(arrayZip({organization_ids:Array(String)}, {brand_ids:Array(String)}),
          (organization_id, brand_id))
  AND partition_date <= {last_day:Date}
GROUP BY organization_id, brand_id, domain
ORDER BY organization_id, brand_id, domain
