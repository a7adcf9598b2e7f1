-- The days a replay ever wrote into $gold_table (fresh rows or tombstones), per tenant, as day
-- numbers: as gold_day_replayed.sql, any version counts (no FINAL), for many tenants in one read.
SELECT
    organization_id,
    brand_id,
    groupUniqArray(toUInt16(day)) AS days
FROM atlas.$gold_table
WHERE has({organization_ids:Array(String)}, organization_id)
  AND has(arrayZip({organization_ids:Array(String)}, {brand_ids:Array(String)}),
          (organization_id, brand_id))
GROUP BY organization_id, brand_id
