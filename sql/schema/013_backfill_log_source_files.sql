-- The fingerprint of what the day's load read (atlas_dagster/exports/fingerprint.py): each data
-- file's path below the tenant's folder, size, S3 ETag or mtime, and footer rows. '' for a day
-- loaded before it was recorded. Compared with a later listing to find re-delivered days.
ALTER TABLE atlas.backfill_log ADD COLUMN IF NOT EXISTS source_files String DEFAULT '';
