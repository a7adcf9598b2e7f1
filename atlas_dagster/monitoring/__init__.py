"""What a backfill looks like from outside: status, stale loads, progress metadata, the
run-log lines."""
