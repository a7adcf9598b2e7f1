-- The report benchmark's backfill_log: N tenants x {days} days x 4 domains, generated inside the
-- engine. By a hash of the row: 88% completed, 4% failed on a row rule (the loader's wording,
-- naming the tenant's own file), 3% without files, 1% running, 4% never tried (no row).
INSERT INTO atlas.backfill_log
    (organization_id, brand_id, domain, partition_date, status, rows_loaded, source_rows, files,
     bytes, error_message, s3_path, query_id, run_id, attempt, started_at, updated_at, worker)
SELECT
    organization_id, 'main', domain, partition_date,
    multiIf(draw < 88, 'completed', draw < 95, 'failed', 'running') AS status,
    if(draw < 88, n_rows, 0), if(draw < 88, n_rows, 0), 1, n_rows * 40,
    multiIf(
        draw < 88 OR draw >= 95, '',
        draw < 92, concat(
            'RowContractError: ', toString(partition_date), ' ', domain,
            ': 1 file(s) break the export contract; the day is refused and nothing of it is kept:\n',
            folder, '/part-0001.parquet: column event_type is not an event type of this domain in ',
            toString(draw), ' row(s), first at row ', toString(n_rows % 997),
            ' (0-based) with value ''bonus'''),
        concat('ExportError: no Parquet files for the day at ', folder, '/')
    ),
    folder, '', 'bench-report-seed', 1,
    now64(6) - toIntervalSecond(1 + n_rows % 5), now64(6), ''
FROM
(
    SELECT
        concat('org', leftPad(toString(intDiv(number, {days:UInt32} * 4)), 3, '0'))
            AS organization_id,
        ['user', 'casino', 'transactions', 'sportsbook'][(number % 4) + 1] AS domain,
        toDate({start:Date}) + intDiv(number % ({days:UInt32} * 4), 4) AS partition_date,
        cityHash64(number) % 100 AS draw,
        10000 + cityHash64(number, 1) % 90000 AS n_rows,
        concat('file:///bench/exports/', organization_id, '/', domain, '/organization_id=',
               organization_id, '/brand_id=main/year=', toString(toYear(partition_date)),
               '/month=', leftPad(toString(toMonth(partition_date)), 2, '0'),
               '/day=', leftPad(toString(toDayOfMonth(partition_date)), 2, '0')) AS folder
    FROM numbers({tenants:UInt32} * {days:UInt32} * 4)
)
WHERE draw < 96
