-- The fingerprint each completed day of a tenant's window was loaded from (backfill_log FINAL:
-- the day's current row), for the domains asked; '' for a day loaded before fingerprints were
-- recorded. One query per tenant, whatever the number of days.
SELECT domain, partition_date, source_files
FROM atlas.backfill_log FINAL
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND domain IN {domains:Array(String)}
  AND partition_date BETWEEN {first_day:Date} AND {last_day:Date}
  AND status = 'completed'
ORDER BY domain, partition_date
