"""Pre-insert validation of a tenant-day's export: schema, types, tenant ids, a bounded sample."""
