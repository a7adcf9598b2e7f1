"""ClickHouse access (connection, schema, the resource, the engine's exclusions) and a run's
tunables as a resource."""
