-- What one replay INSERT wrote for a tenant-day (its rows share computed_at): fresh rows,
-- tombstones, and the totals of the fresh rows. $metric_totals: sumIf(<metric>, is_deleted = 0)
-- for the gold table's metric columns, named from the gold registry.
SELECT
    countIf(is_deleted = 0) AS rows_written,
    countIf(is_deleted = 1) AS rows_deleted,
    $metric_totals
FROM atlas.$gold_table
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND day = {day:Date}
  AND computed_at = {computed_at:DateTime64(6, 'UTC')}
