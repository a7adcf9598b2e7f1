-- Records that the schema files with this digest are applied.
INSERT INTO atlas.schema_version (digest, applied_at) VALUES ({digest:String}, now64(6))
