-- Whether one tenant-day still holds backfilled rows, i.e. whether delete_day has work to do.
-- No FINAL: any version of a backfilled row counts, and lightweight-deleted rows are never read,
-- so this answers exactly that question without merging the day's parts on its sort key.
SELECT count() > 0 AS present
FROM (
    SELECT 1
    FROM atlas.$raw_table
    WHERE organization_id = {organization_id:String}
      AND brand_id = {brand_id:String}
      AND event_date = {partition_date:Date}
      AND ingestion_path = 'backfill'
    LIMIT 1
)
