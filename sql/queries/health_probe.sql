-- The service's pushback as a backfill run sees it (orchestration/backpressure.py): the most
-- active parts in one partition of the raw tables, the server's parts_to_delay_insert, and the
-- INSERTs it delayed or rejected so far (cumulative counters: the run compares two probes).
SELECT
    (
        SELECT max(parts)
        FROM
        (
            SELECT count() AS parts
            FROM system.parts
            WHERE active AND database = 'atlas' AND table IN {tables:Array(String)}
            GROUP BY table, partition_id
        )
    ) AS max_parts,
    (
        SELECT toUInt64OrZero(any(value))
        FROM system.merge_tree_settings
        WHERE name = 'parts_to_delay_insert'
    ) AS parts_to_delay_insert,
    (
        SELECT sum(value)
        FROM system.events
        WHERE event IN ('DelayedInserts', 'RejectedInserts')
    ) AS pushed_back_inserts
