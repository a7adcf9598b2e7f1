-- Monitoring guide query 4, verbatim (seu_org_id / seu_brand_id are the guide's placeholders).
SELECT domain, partition_date, error_message, s3_path, updated_at
FROM atlas.backfill_log FINAL
WHERE organization_id = 'seu_org_id'
  AND status          = 'failed'
ORDER BY partition_date;
