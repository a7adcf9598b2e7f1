-- Each tenant-domain's progress inside its window, by each day's newest state (FINAL): the one
-- count of days done, failed and running and of their rows, behind `status`'s days and time
-- left, the raw run's progress metadata and the client report's figures. The windows come as
-- bound arrays (one element per tenant and domain): one FINAL read for any number of tenants.
WITH windows AS (
    SELECT w.1 AS organization_id, w.2 AS brand_id, w.3 AS domain, w.4 AS first_day,
           w.5 AS last_day
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
SELECT
    w.organization_id AS organization_id,
    w.brand_id AS brand_id,
    w.domain AS domain,
    countIf(l.status = 'completed') AS days_done,
    countIf(l.status = 'failed') AS days_failed,
    countIf(l.status = 'running') AS days_running,
    sumIf(l.rows_loaded, l.status = 'completed') AS rows_loaded,
    sumIf(l.source_rows, l.status = 'completed') AS source_rows,
    minIf(l.partition_date, l.status = 'completed') AS first_done,
    maxIf(l.partition_date, l.status = 'completed') AS last_done,
    max(l.updated_at) AS last_activity
FROM (
    SELECT organization_id, brand_id, domain, partition_date, status, rows_loaded, source_rows,
           updated_at
    FROM atlas.backfill_log FINAL
    -- IN builds a set: has() over the array compared each row with every element (0.7 s over
    -- 420k rows of 100 tenants; IN 0.09-0.15 s, one tenant's 17 ms).
    WHERE organization_id IN {organization_ids:Array(String)}
      AND partition_date >= arrayMin({first_days:Array(Date)})
      AND partition_date <= arrayMax({last_days:Array(Date)})
) AS l
INNER JOIN windows AS w
    ON l.organization_id = w.organization_id AND l.brand_id = w.brand_id AND l.domain = w.domain
WHERE l.partition_date BETWEEN w.first_day AND w.last_day
GROUP BY w.organization_id, w.brand_id, w.domain
ORDER BY organization_id, brand_id, domain
