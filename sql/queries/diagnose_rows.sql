-- Only after a tenant-day's INSERT failed: every row rule broken in each of the day's files, with
-- how many rows break it and the first such row (0-based) and its value. Read inside ClickHouse,
-- the files' columns as Nullable so that nulls are seen; the aggregates come from
-- atlas_dagster/validation/rows.py (the same conditions as the INSERT's guards);
-- $folder_columns as in load_day.sql.
$folder_columns
SELECT _path AS file,
       $aggregates
FROM $source_function
GROUP BY file
ORDER BY file
SETTINGS use_hive_partitioning = 0
