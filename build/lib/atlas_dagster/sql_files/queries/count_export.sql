-- Rows and distinct event_ids of one tenant-day's export files, read inside ClickHouse (only the
-- event_id column). Run only when a load's distinct events differ from the files' row count, to
-- tell duplicate event_ids in the export apart from lost rows.
SELECT count() AS export_rows, uniqExact(event_id) AS export_events
FROM $source_function
SETTINGS use_hive_partitioning = 0
