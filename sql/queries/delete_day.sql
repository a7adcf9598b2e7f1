-- Clears one tenant-day's backfilled rows so that a re-run yields exactly the export's rows.
-- $loaded is empty (every backfilled row), or a bound on ingested_at from
-- atlas_dagster/loading/statements.py: a reload deletes the rows loaded up to the previous load
-- once the new ones are in, and on a failure only the rows it wrote itself.
DELETE FROM atlas.$raw_table
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND event_date = {partition_date:Date}
  AND ingestion_path = 'backfill'
  $loaded
