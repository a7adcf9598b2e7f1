"""Gold tables: their registry, the tenant-day replay and the reconciliation with raw."""
