-- Whether a statement (by its query_id) still runs on this server: an INSERT whose connection
-- dropped is resolved before its day is tried again (loading/retry.py).
SELECT count() FROM system.processes WHERE query_id = {query_id:String}
