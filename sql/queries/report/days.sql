-- The report's calendar: the days of each tenant, domain and newest state (FINAL), as day numbers
-- (days since 1970-01-01) in one array per group, for many tenants in one read. A day that failed
-- because its export folder holds no file yet is 'not_exported': the client has not sent it; a
-- day completed with no row is 'empty' (a complete export without the day's folder).
SELECT
    organization_id,
    brand_id,
    domain,
    multiIf(status = 'failed' AND position(error_message, 'no Parquet files for the day at ') > 0,
            'not_exported',
            status = 'completed' AND rows_loaded = 0, 'empty',
            status) AS state,
    groupArray(toUInt16(partition_date)) AS days
FROM atlas.backfill_log FINAL
WHERE organization_id IN {organization_ids:Array(String)}
  AND (organization_id, brand_id) IN (
      SELECT arrayJoin(arrayZip({organization_ids:Array(String)}, {brand_ids:Array(String)})))
  AND partition_date <= {last_day:Date}
GROUP BY organization_id, brand_id, domain, state
