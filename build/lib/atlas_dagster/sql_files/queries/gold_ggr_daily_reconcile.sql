-- The gold_reconciles_raw check of one tenant-day of atlas.gold_ggr_daily: the gold rows (FINAL)
-- against the raw tables computed another way: no FINAL (each event's latest version by
-- argMax over ingested_at), the UTC day as a timestamp range, no grouping by currency.
WITH
    raw_bet_events AS
    (
        SELECT 'casino' AS vertical,
               argMax(event_type, ingested_at) AS event_type,
               argMax(amount, ingested_at) AS amount,
               argMax(currency, ingested_at) AS currency
        FROM atlas.$casino_table
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND event_timestamp >= {day_start:DateTime64(6, 'UTC')}
          AND event_timestamp < {day_end:DateTime64(6, 'UTC')}
        GROUP BY event_date, event_id
        UNION ALL
        SELECT 'sportsbook' AS vertical,
               argMax(event_type, ingested_at) AS event_type,
               argMax(amount, ingested_at) AS amount,
               argMax(currency, ingested_at) AS currency
        FROM atlas.$sportsbook_table
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
        sum(bets) AS gold_bets,
        sum(turnover) AS gold_turnover,
        sum(payouts) AS gold_payouts,
        sum(ggr) AS gold_ggr
    FROM atlas.gold_ggr_daily FINAL
    WHERE organization_id = {organization_id:String}
      AND brand_id = {brand_id:String}
      AND day = {day:Date}
) AS gold
CROSS JOIN
(
    SELECT
        uniqExact(vertical, currency) AS raw_rows,
        countIf(event_type = 'open') AS raw_bets,
        sumIf(amount, event_type = 'open') AS raw_turnover,
        sumIf(amount, event_type IN ('win', 'cashout')) AS raw_payouts,
        raw_turnover - raw_payouts AS raw_ggr
    FROM raw_bet_events
) AS raw
