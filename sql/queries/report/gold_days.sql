-- The days a replay ever wrote into $gold_table (fresh rows or tombstones), per tenant, as day
-- numbers: as gold_day_replayed.sql, any version counts (no FINAL), for many tenants in one read.
SELECT
    organization_id,
    brand_id,
    groupUniqArray(toUInt16(day)) AS days
FROM atlas.$gold_table
WHERE organization_id IN {organization_ids:Array(String)}
  AND (organization_id, brand_id) IN (
      SELECT arrayJoin(arrayZip({organization_ids:Array(String)}, {brand_ids:Array(String)})))
GROUP BY organization_id, brand_id
