-- The gold_reconciles_raw check of one tenant-day of atlas.gold_users_daily: the gold row (FINAL)
-- against the raw tables computed another way: no FINAL (latest version by argMax over
-- ingested_at), the UTC day as a timestamp range, bettors as the union of distinct user sets.
WITH
    raw_user_events AS
    (
        SELECT argMax(event_type, ingested_at) AS event_type
        FROM atlas.$user_table
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND event_timestamp >= {day_start:DateTime64(6, 'UTC')}
          AND event_timestamp < {day_end:DateTime64(6, 'UTC')}
        GROUP BY event_date, event_id
    ),
    raw_deposits AS
    (
        SELECT argMax(user_id, ingested_at) AS user_id
        FROM atlas.$transactions_table
        WHERE organization_id = {organization_id:String}
          AND brand_id = {brand_id:String}
          AND event_timestamp >= {day_start:DateTime64(6, 'UTC')}
          AND event_timestamp < {day_end:DateTime64(6, 'UTC')}
        GROUP BY event_date, event_id
        HAVING argMax(event_type, ingested_at) = 'deposit'
    ),
    raw_casino_bettors AS
    (
        SELECT groupUniqArray(user_id) AS users
        FROM
        (
            SELECT argMax(user_id, ingested_at) AS user_id
            FROM atlas.$casino_table
            WHERE organization_id = {organization_id:String}
              AND brand_id = {brand_id:String}
              AND event_timestamp >= {day_start:DateTime64(6, 'UTC')}
              AND event_timestamp < {day_end:DateTime64(6, 'UTC')}
            GROUP BY event_date, event_id
            HAVING argMax(event_type, ingested_at) = 'open'
        )
    ),
    raw_sportsbook_bettors AS
    (
        SELECT groupUniqArray(user_id) AS users
        FROM
        (
            SELECT argMax(user_id, ingested_at) AS user_id
            FROM atlas.$sportsbook_table
            WHERE organization_id = {organization_id:String}
              AND brand_id = {brand_id:String}
              AND event_timestamp >= {day_start:DateTime64(6, 'UTC')}
              AND event_timestamp < {day_end:DateTime64(6, 'UTC')}
            GROUP BY event_date, event_id
            HAVING argMax(event_type, ingested_at) = 'open'
        )
    )
SELECT *
FROM
(
    SELECT
        sum(registrations) AS gold_registrations,
        sum(profile_updates) AS gold_profile_updates,
        sum(depositing_users) AS gold_depositing_users,
        sum(active_bettors) AS gold_active_bettors
    FROM atlas.gold_users_daily FINAL
    WHERE organization_id = {organization_id:String}
      AND brand_id = {brand_id:String}
      AND day = {day:Date}
) AS gold
CROSS JOIN
(
    SELECT
        countIf(event_type = 'register') AS raw_registrations,
        countIf(event_type = 'update') AS raw_profile_updates
    FROM raw_user_events
) AS profile
CROSS JOIN
(
    SELECT uniqExact(user_id) AS raw_depositing_users FROM raw_deposits
) AS depositors
CROSS JOIN
(
    SELECT toUInt64(length(arrayDistinct(arrayConcat(c.users, s.users)))) AS raw_active_bettors
    FROM raw_casino_bettors AS c CROSS JOIN raw_sportsbook_bettors AS s
) AS bettors
