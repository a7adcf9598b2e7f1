"""Asset checks: raw tenant-days against backfill_log and the export; gold against raw."""
