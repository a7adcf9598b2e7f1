-- The gold_reconciles_raw check of one tenant-day of atlas.gold_transactions_daily: the gold rows
-- (FINAL) against the raw table computed another way: no FINAL (latest version by argMax over
-- ingested_at), the UTC day as a timestamp range, totals over every currency.
WITH
    raw_transactions AS
    (
        SELECT argMax(event_type, ingested_at) AS event_type,
               argMax(amount, ingested_at) AS amount,
               argMax(currency, ingested_at) AS currency
        FROM atlas.$transactions_table
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND event_timestamp >= {day_start:DateTime64(6, 'UTC')}
          AND event_timestamp < {day_end:DateTime64(6, 'UTC')}
        GROUP BY event_date, event_id
    )
SELECT *
FROM
(
    SELECT
        count() AS gold_rows,
        sum(deposits_count) AS gold_deposits_count,
        sum(deposits_amount) AS gold_deposits_amount,
        sum(withdrawals_count) AS gold_withdrawals_count,
        sum(withdrawals_amount) AS gold_withdrawals_amount,
        sum(net_deposits) AS gold_net_deposits
    FROM atlas.gold_transactions_daily FINAL
    WHERE organization_id = {organization_id:String}
      AND brand_id = {brand_id:String}
      AND day = {day:Date}
) AS gold
CROSS JOIN
(
    SELECT
        uniqExact(currency) AS raw_rows,
        countIf(event_type = 'deposit') AS raw_deposits_count,
        sumIf(amount, event_type = 'deposit') AS raw_deposits_amount,
        countIf(event_type = 'withdraw') AS raw_withdrawals_count,
        sumIf(amount, event_type = 'withdraw') AS raw_withdrawals_amount,
        raw_deposits_amount - raw_withdrawals_amount AS raw_net_deposits
    FROM raw_transactions
) AS raw
