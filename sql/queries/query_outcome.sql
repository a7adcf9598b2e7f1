-- How a statement (by its query_id) ended on this server, from the query log ('' if not
-- logged): QueryFinish, ExceptionBeforeStart or ExceptionWhileProcessing.
SELECT toString(argMax(type, event_time_microseconds))
FROM system.query_log
WHERE query_id = {query_id:String} AND type != 'QueryStart'
  AND event_date >= yesterday()
