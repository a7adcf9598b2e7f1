-- Recomputes one tenant-day of atlas.gold_sportsbook_liability_daily from the sportsbook raw
-- table (FINAL) in one INSERT: the bets opened in [window_start 00:00, day + 1 00:00) UTC with
-- no win, lose or cashout before day + 1 00:00, per currency of the open; plus is_deleted = 1
-- tombstones for currencies that no longer have an open bet at the end of the day.
-- Settlements are read over the same days: a bet is never settled before it is opened.
INSERT INTO atlas.gold_sportsbook_liability_daily
    (organization_id, brand_id, day, currency, open_bets, liability, lookback_days,
     computed_at, is_deleted)
WITH
    window_events AS
    (
        SELECT event_type, bet_id, currency, potential_payout
        FROM atlas.$sportsbook_table FINAL
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND event_date BETWEEN {window_start:Date} AND {day:Date}
    ),
    fresh AS
    (
        SELECT
            currency,
            count() AS open_bets,
            -- a bet without potential_payout is open but adds nothing to the exposure
            sum(ifNull(potential_payout, toDecimal64(0, 4))) AS liability
        FROM window_events
        WHERE event_type = 'open'
          AND bet_id NOT IN
              (
                  SELECT bet_id
                  FROM window_events
                  WHERE event_type IN ('win', 'lose', 'cashout')
              )
        GROUP BY currency
    ),
    vanished AS
    (
        SELECT currency
        FROM atlas.gold_sportsbook_liability_daily FINAL
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND day = {day:Date}
          AND currency NOT IN (SELECT currency FROM fresh)
    )
SELECT
    {organization_id:String}, {brand_id:String}, {day:Date}, currency, open_bets, liability,
    {lookback_days:UInt16}, {computed_at:DateTime64(6, 'UTC')}, 0
FROM fresh
UNION ALL
SELECT
    {organization_id:String}, {brand_id:String}, {day:Date}, currency, 0, toDecimal128(0, 4),
    {lookback_days:UInt16}, {computed_at:DateTime64(6, 'UTC')}, 1
FROM vanished
