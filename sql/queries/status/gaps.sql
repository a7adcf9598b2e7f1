-- Days of each tenant's gap window without a completed load, for every tenant at once: the
-- windows come as bound arrays (one element per tenant and domain), so the cost is one FINAL read
-- of the windows' rows, whatever the number of tenants.
WITH expected AS (
    SELECT
        w.1 AS organization_id,
        w.2 AS brand_id,
        w.3 AS domain,
        arrayJoin(arrayMap(i -> w.4 + i, range(toUInt32(dateDiff('day', w.4, w.5) + 1))))
            AS partition_date
    FROM (
        SELECT arrayJoin(arrayZip(
            {organization_ids:Array(String)},
            {brand_ids:Array(String)},
            {domains:Array(String)},
            {first_days:Array(Date)},
            {last_days:Array(Date)}
        )) AS w
    )
)
SELECT organization_id, brand_id, domain, partition_date
FROM expected
WHERE (organization_id, brand_id, domain, partition_date) NOT IN (
    SELECT organization_id, brand_id, domain, partition_date
    FROM atlas.backfill_log FINAL
    WHERE status = 'completed'
      AND partition_date >= arrayMin({first_days:Array(Date)})
      AND organization_id IN {organization_ids:Array(String)}
)
ORDER BY organization_id, brand_id, domain, partition_date
