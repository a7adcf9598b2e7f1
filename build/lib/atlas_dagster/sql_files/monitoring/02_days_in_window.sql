-- Monitoring guide query 2, verbatim (seu_org_id / seu_brand_id are the guide's placeholders).
SELECT partition_date, status, rows_loaded, updated_at
FROM atlas.backfill_log FINAL
WHERE organization_id = 'seu_org_id'
  AND brand_id        = 'seu_brand_id'
  AND domain          = 'user'
ORDER BY partition_date;
