-- Which of a tenant's days still hold backfilled rows in one raw table, read once for all the
-- days of a run: a day absent here needs no clear before its INSERT. No FINAL, as in
-- backfill_rows_exist: any version of a backfilled row counts.
SELECT DISTINCT event_date
FROM atlas.$raw_table
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND event_date IN {dates:Array(Date)}
  AND ingestion_path = 'backfill'
