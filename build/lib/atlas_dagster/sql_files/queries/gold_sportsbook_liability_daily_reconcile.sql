-- The gold_reconciles_raw check of one tenant-day of atlas.gold_sportsbook_liability_daily: the
-- gold rows (FINAL) against the raw table computed another way: no FINAL (latest version by
-- argMax over ingested_at), the window as a timestamp range, one row per bet_id counting its
-- opens and settlements instead of an anti-join.
WITH
    raw_window_events AS
    (
        SELECT argMax(bet_id, ingested_at) AS bet_id,
               argMax(event_type, ingested_at) AS event_type,
               argMax(currency, ingested_at) AS currency,
               argMax(potential_payout, ingested_at) AS potential_payout
        FROM atlas.$sportsbook_table
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND event_timestamp >= {window_start_at:DateTime64(6, 'UTC')}
          AND event_timestamp < {day_end:DateTime64(6, 'UTC')}
        GROUP BY event_date, event_id
    ),
    raw_bets AS
    (
        SELECT
            bet_id,
            countIf(event_type = 'open') AS opens,
            countIf(event_type IN ('win', 'lose', 'cashout')) AS settlements,
            anyIf(currency, event_type = 'open') AS currency,
            sumIf(ifNull(potential_payout, toDecimal64(0, 4)), event_type = 'open') AS exposure
        FROM raw_window_events
        GROUP BY bet_id
    )
SELECT *
FROM
(
    SELECT
        count() AS gold_rows,
        sum(open_bets) AS gold_open_bets,
        sum(liability) AS gold_liability
    FROM atlas.gold_sportsbook_liability_daily FINAL
    WHERE organization_id = {organization_id:String}
      AND brand_id = {brand_id:String}
      AND day = {day:Date}
) AS gold
CROSS JOIN
(
    SELECT
        uniqExactIf(currency, opens > 0 AND settlements = 0) AS raw_rows,
        sumIf(opens, settlements = 0) AS raw_open_bets,
        sumIf(exposure, settlements = 0) AS raw_liability
    FROM raw_bets
) AS raw
