-- Whether the schema version table exists yet (a new database has none).
SELECT count() FROM system.tables WHERE database = 'atlas' AND name = 'schema_version'
