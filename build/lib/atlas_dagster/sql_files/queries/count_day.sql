-- Distinct events of one tenant-day in a raw table (ReplacingMergeTree: read with FINAL).
SELECT count() AS events
FROM atlas.$raw_table FINAL
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND event_date = {partition_date:Date}
