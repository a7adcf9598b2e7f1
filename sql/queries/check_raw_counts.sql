-- The raw checks' fresh count of one raw table: distinct events (FINAL) of each listed
-- tenant-day, keyed like check_log_rows. One such SELECT per domain of a batch, joined with
-- UNION ALL into one query; each branch binds parameters suffixed with its domain name.
SELECT {domain_$domain:String} AS domain, organization_id, brand_id,
       event_date AS partition_date, count() AS events
FROM atlas.$raw_table FINAL
WHERE organization_id IN {organization_ids_$domain:Array(String)}
  AND event_date BETWEEN {first_day_$domain:Date} AND {last_day_$domain:Date}
  AND (organization_id, brand_id, event_date) IN (
      SELECT key.1, key.2, key.3
      FROM (
          SELECT arrayJoin(arrayZip({organization_ids_$domain:Array(String)},
                                    {brand_ids_$domain:Array(String)},
                                    {days_$domain:Array(Date)})) AS key
      )
  )
GROUP BY organization_id, brand_id, event_date
