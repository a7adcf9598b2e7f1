-- The fleet benchmark's backfill_log: every tenant-day-domain of the fleet 'completed', as after
-- a full history backfill (N tenants x days x 4 domains rows), generated inside the engine.
INSERT INTO atlas.backfill_log
    (organization_id, brand_id, domain, partition_date, status, rows_loaded, source_rows, files,
     bytes, error_message, s3_path, query_id, run_id, attempt, started_at, updated_at, worker)
SELECT
    concat('org', leftPad(toString(intDiv(number, {days:UInt32} * 4)), 3, '0')) AS organization_id,
    'main' AS brand_id,
    ['user', 'casino', 'transactions', 'sportsbook'][(number % 4) + 1] AS domain,
    toDate({start:Date}) + intDiv(number % ({days:UInt32} * 4), 4) AS partition_date,
    'completed', 1000, 1000, 1, 100000, '', '', '', 'bench-fleet-seed', 1,
    now64(6), now64(6), ''
FROM numbers({tenants:UInt32} * {days:UInt32} * 4)
