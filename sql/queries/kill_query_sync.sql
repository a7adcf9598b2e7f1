-- Stops a statement whose connection dropped and waits until the server has stopped it.
KILL QUERY WHERE query_id = {query_id:String} SYNC
