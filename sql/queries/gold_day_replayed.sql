-- 1 when a replay ever wrote the tenant-day into $gold_table (fresh rows or tombstones), else 0:
-- tells a day gold never got from one whose figures differ. No FINAL: any version counts.
SELECT count() > 0
FROM atlas.$gold_table
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND day = {day:Date}
