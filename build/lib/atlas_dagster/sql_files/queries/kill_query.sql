-- Stops an in-flight INSERT on a ClickHouse server when its Dagster run is canceled.
KILL QUERY WHERE query_id = {query_id:String} ASYNC
