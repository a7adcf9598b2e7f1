-- The process that runs a tenant-day's INSERT ('hostname:pid:process-start-ticks'), written with the
-- 'running' row, so that a load whose worker died can be found and marked failed.
ALTER TABLE atlas.backfill_log ADD COLUMN IF NOT EXISTS worker String DEFAULT '';
