-- Distinct events per day of one tenant in a raw table over a window (ReplacingMergeTree: FINAL).
SELECT event_date AS partition_date, count() AS events
FROM atlas.$raw_table FINAL
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND event_date BETWEEN {first_day:Date} AND {last_day:Date}
GROUP BY event_date
