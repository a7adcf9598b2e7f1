-- Monitoring guide query 3, verbatim (seu_org_id / seu_brand_id are the guide's placeholders).
WITH
    arrayJoin(arrayMap(i -> toDate(today() - 180 + i), range(180))) AS expected_day
SELECT expected_day
FROM (SELECT expected_day)
WHERE expected_day NOT IN (
    SELECT partition_date
    FROM atlas.backfill_log FINAL
    WHERE organization_id = 'seu_org_id'
      AND brand_id        = 'seu_brand_id'
      AND domain          = 'user'
      AND status          = 'completed'
)
ORDER BY expected_day;
