-- The report benchmark's gold: each tenant's oldest {gold_days} days replayed into $gold_table
-- (a row per tenant-day; the report only asks which days a replay wrote).
INSERT INTO atlas.$gold_table (organization_id, brand_id, day)
SELECT
    concat('org', leftPad(toString(intDiv(number, {gold_days:UInt32})), 3, '0')),
    'main',
    toDate({start:Date}) + number % {gold_days:UInt32}
FROM numbers({tenants:UInt32} * {gold_days:UInt32})
