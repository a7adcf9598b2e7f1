-- The demo's closing table: GGR of the tenant's newest days, per vertical and currency.
SELECT day, vertical, currency, bets, turnover, payouts, ggr
FROM atlas.gold_ggr_daily FINAL
WHERE organization_id = {organization_id:String}
  AND brand_id = {brand_id:String}
  AND day >= {since:Date}
ORDER BY day DESC, vertical, currency
