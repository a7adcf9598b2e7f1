-- Which of a tenant's days still hold backfilled rows in one raw table, and the newest ingested_at
-- of each, read once for all the days of a run: a day absent here needs no clear before its
-- INSERT, and a reload of a completed day deletes its rows up to that instant once the new ones
-- are in. No FINAL, as in backfill_rows_exist: any version of a backfilled row counts.
SELECT event_date, max(ingested_at) AS loaded_until
FROM atlas.$raw_table
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND event_date IN {dates:Array(Date)}
  AND ingestion_path = 'backfill'
GROUP BY event_date
