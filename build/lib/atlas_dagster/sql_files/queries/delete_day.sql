-- Clears one tenant-day's backfilled rows so that a re-run yields exactly the export's rows.
DELETE FROM atlas.$raw_table
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND event_date = {partition_date:Date}
  AND ingestion_path = 'backfill'
