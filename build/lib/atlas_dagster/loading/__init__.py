"""The load side: one tenant-day into the inbound Null table, logged in backfill_log."""
