-- Monitoring guide query 1, verbatim (seu_org_id / seu_brand_id are the guide's placeholders).
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
WHERE organization_id = 'seu_org_id'
GROUP BY organization_id, brand_id, domain
ORDER BY domain;
