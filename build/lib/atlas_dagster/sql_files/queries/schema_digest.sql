-- The digest of the schema files applied last ('' when the database is new).
SELECT if(count() = 0, '', argMax(digest, applied_at)) AS digest
FROM atlas.schema_version
