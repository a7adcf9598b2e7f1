-- Recomputes one tenant-day of atlas.gold_users_daily from the user, transactions, casino and
-- sportsbook raw tables (FINAL) in one INSERT. The day has a row when any of its four metrics
-- is non-zero; otherwise an existing row is replaced by an is_deleted = 1 tombstone.
INSERT INTO atlas.gold_users_daily
    (organization_id, brand_id, day, registrations, profile_updates, depositing_users,
     active_bettors, computed_at, is_deleted)
WITH
    profile AS
    (
        SELECT
            countIf(event_type = 'register') AS registrations,
            countIf(event_type = 'update') AS profile_updates
        FROM atlas.$user_table FINAL
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND event_date = {day:Date}
    ),
    depositors AS
    (
        SELECT uniqExactIf(user_id, event_type = 'deposit') AS depositing_users
        FROM atlas.$transactions_table FINAL
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND event_date = {day:Date}
    ),
    bettors AS
    (
        -- one user betting in both verticals is one active bettor
        SELECT uniqExact(user_id) AS active_bettors
        FROM
        (
            SELECT user_id
            FROM atlas.$casino_table FINAL
            WHERE organization_id = {organization_id:String}
              AND brand_id = {brand_id:String}
              AND event_date = {day:Date}
              AND event_type = 'open'
            UNION ALL
            SELECT user_id
            FROM atlas.$sportsbook_table FINAL
            WHERE organization_id = {organization_id:String}
              AND brand_id = {brand_id:String}
              AND event_date = {day:Date}
              AND event_type = 'open'
        )
    ),
    fresh AS
    (
        SELECT registrations, profile_updates, depositing_users, active_bettors
        FROM profile CROSS JOIN depositors CROSS JOIN bettors
        WHERE registrations + profile_updates + depositing_users + active_bettors > 0
    )
SELECT
    {organization_id:String}, {brand_id:String}, {day:Date},
    registrations, profile_updates, depositing_users, active_bettors,
    {computed_at:DateTime64(6, 'UTC')}, 0
FROM fresh
UNION ALL
SELECT
    {organization_id:String}, {brand_id:String}, {day:Date}, 0, 0, 0, 0,
    {computed_at:DateTime64(6, 'UTC')}, 1
FROM atlas.gold_users_daily FINAL
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND day = {day:Date}
  AND (SELECT count() FROM fresh) = 0
