-- Writes a new version of one tenant-day's backfill_log row, every value bound. Measured on
-- chDB 26.9, 40 one-row INSERTs each: bound scalars (INSERT … SELECT) 7.0-7.3 ms a row, bound
-- arrays 7.5-8.2 ms, escaped literal VALUES 7.3-7.4 ms; bound scalars in VALUES took 27 ms (the
-- expression interpreter).
INSERT INTO atlas.backfill_log
    (organization_id, brand_id, domain, partition_date, status, rows_loaded, source_rows,
     duplicate_rows, files, bytes, error_message, s3_path, query_id, source_files, run_id, attempt,
     worker, started_at, updated_at)
SELECT {organization_id:String},
       {brand_id:String},
       {domain:String},
       {partition_date:Date},
       {status:String},
       {rows_loaded:UInt64},
       {source_rows:UInt64},
       {duplicate_rows:UInt64},
       {files:UInt32},
       {bytes:UInt64},
       {error_message:String},
       {s3_path:String},
       {query_id:String},
       {source_files:String},
       {run_id:String},
       {attempt:UInt32},
       {worker:String},
       {started_at:DateTime64(6)},
       {updated_at:DateTime64(6)}
