-- Recomputes one tenant-day of atlas.gold_transactions_daily from the transactions raw table
-- (FINAL) in one INSERT: fresh rows per currency plus is_deleted = 1 tombstones for currencies
-- the table holds for the day and the raw data no longer yields.
INSERT INTO atlas.gold_transactions_daily
    (organization_id, brand_id, day, currency, deposits_count, deposits_amount,
     withdrawals_count, withdrawals_amount, net_deposits, computed_at, is_deleted)
WITH
    fresh AS
    (
        SELECT
            currency,
            countIf(event_type = 'deposit') AS deposits_count,
            sumIf(amount, event_type = 'deposit') AS deposits_amount,
            countIf(event_type = 'withdraw') AS withdrawals_count,
            sumIf(amount, event_type = 'withdraw') AS withdrawals_amount
        FROM atlas.$transactions_table FINAL
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND event_date = {day:Date}
        GROUP BY currency
    ),
    vanished AS
    (
        SELECT currency
        FROM atlas.gold_transactions_daily FINAL
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND day = {day:Date}
          AND currency NOT IN (SELECT currency FROM fresh)
    )
SELECT
    {organization_id:String}, {brand_id:String}, {day:Date}, currency,
    deposits_count, deposits_amount, withdrawals_count, withdrawals_amount,
    deposits_amount - withdrawals_amount,
    {computed_at:DateTime64(6, 'UTC')}, 0
FROM fresh
UNION ALL
SELECT
    {organization_id:String}, {brand_id:String}, {day:Date}, currency,
    0, toDecimal128(0, 4), 0, toDecimal128(0, 4), toDecimal128(0, 4),
    {computed_at:DateTime64(6, 'UTC')}, 1
FROM vanished
