-- The raw checks' read of backfill_log: the current state (FINAL: the row that wins, as the
-- monitoring guide's queries see it) of each listed tenant-day-domain, one query for a whole
-- batch of them. The keys come as four bound arrays of equal length, one element per day.
SELECT organization_id, brand_id, domain, partition_date, status, rows_loaded, source_rows,
       duplicate_rows, files, error_message, s3_path, run_id, attempt, updated_at, source_files
FROM atlas.backfill_log FINAL
WHERE organization_id IN {organization_ids:Array(String)}
  AND partition_date BETWEEN {first_day:Date} AND {last_day:Date}
  AND (organization_id, brand_id, domain, partition_date) IN (
      SELECT key.1, key.2, key.3, key.4
      FROM (
          SELECT arrayJoin(arrayZip({organization_ids:Array(String)}, {brand_ids:Array(String)},
                                    {domains:Array(String)}, {days:Array(Date)})) AS key
      )
  )
