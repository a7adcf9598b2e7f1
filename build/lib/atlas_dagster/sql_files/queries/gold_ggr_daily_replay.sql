-- Recomputes one tenant-day of atlas.gold_ggr_daily from the casino and sportsbook raw tables
-- (FINAL: each event_id once) in one INSERT: the day's fresh rows, plus an is_deleted = 1
-- tombstone for every key that the table holds for the day and the raw data no longer yields.
-- Cash basis: stakes count on the day of the open, payouts on the day of the win or cashout.
-- Dollar placeholders are raw table names from the domain registry; {name:Type} are bound.
INSERT INTO atlas.gold_ggr_daily
    (organization_id, brand_id, day, vertical, currency, bets, turnover, payouts, ggr,
     computed_at, is_deleted)
WITH
    bet_events AS
    (
        SELECT 'casino' AS vertical, event_type, amount, currency
        FROM atlas.$casino_table FINAL
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND event_date = {day:Date}
        UNION ALL
        SELECT 'sportsbook' AS vertical, event_type, amount, currency
        FROM atlas.$sportsbook_table FINAL
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND event_date = {day:Date}
    ),
    fresh AS
    (
        SELECT
            vertical,
            currency,
            countIf(event_type = 'open') AS bets,
            sumIf(amount, event_type = 'open') AS turnover,
            sumIf(amount, event_type IN ('win', 'cashout')) AS payouts
        FROM bet_events
        GROUP BY vertical, currency
    ),
    vanished AS
    (
        SELECT vertical, currency
        FROM atlas.gold_ggr_daily FINAL
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND day = {day:Date}
          AND (vertical, currency) NOT IN (SELECT vertical, currency FROM fresh)
    )
SELECT
    {organization_id:String}, {brand_id:String}, {day:Date}, vertical, currency,
    bets, turnover, payouts, turnover - payouts,
    {computed_at:DateTime64(6, 'UTC')}, 0
FROM fresh
UNION ALL
SELECT
    {organization_id:String}, {brand_id:String}, {day:Date}, vertical, currency,
    0, toDecimal128(0, 4), toDecimal128(0, 4), toDecimal128(0, 4),
    {computed_at:DateTime64(6, 'UTC')}, 1
FROM vanished
