-- The query log is written in batches: flushed before it is read for one statement's outcome.
SYSTEM FLUSH LOGS
