-- Which version of sql/schema was applied last (a digest of the files), so that a run applies the
-- DDL only when the files changed. Operators applying the files by hand may ignore this table.
CREATE TABLE IF NOT EXISTS atlas.schema_version
(
    digest     String,
    applied_at DateTime64(6, 'UTC')
)
ENGINE = MergeTree
ORDER BY applied_at;
