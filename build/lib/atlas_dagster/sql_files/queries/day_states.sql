-- Each logged day of one tenant and domain in a window: its state in backfill_log (FINAL) and the
-- raw table's distinct events, so that a completed day whose rows no longer match counts as failed.
SELECT
    log.partition_date AS partition_date,
    log.status AS status,
    log.rows_loaded AS rows_loaded,
    ifNull(raw.events, 0) AS raw_events
FROM
(
    SELECT partition_date, status, rows_loaded
    FROM atlas.backfill_log FINAL
    WHERE organization_id = {organization_id:String}
      AND brand_id = {brand_id:String}
      AND domain = {domain:String}
      AND partition_date BETWEEN {start_date:Date} AND {end_date:Date}
) AS log
LEFT JOIN
(
    SELECT event_date AS partition_date, count() AS events
    FROM atlas.$raw_table FINAL
    WHERE organization_id = {organization_id:String}
      AND brand_id = {brand_id:String}
      AND event_date BETWEEN {start_date:Date} AND {end_date:Date}
    GROUP BY event_date
) AS raw USING (partition_date)
ORDER BY partition_date
SETTINGS join_use_nulls = 1
