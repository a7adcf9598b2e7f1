-- Rows of the export whose event_id repeats another row's: they count once, so that
-- source_rows = rows_loaded + duplicate_rows for a completed day.
ALTER TABLE atlas.backfill_log ADD COLUMN IF NOT EXISTS duplicate_rows UInt64 DEFAULT 0;
