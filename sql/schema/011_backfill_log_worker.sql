ALTER TABLE atlas.backfill_log ADD COLUMN IF NOT EXISTS worker String DEFAULT ''
