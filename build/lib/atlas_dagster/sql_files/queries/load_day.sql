-- One tenant-day of one domain, read and inserted inside ClickHouse: no row passes through Python.
-- Dollar placeholders are identifiers and expressions built from the domain registry;
-- {name:Type} are bound parameters. The throwIf guards refuse the whole day before a block of
-- another tenant, another day or an unknown event type can be written.
INSERT INTO atlas.$inbound_table ($columns)
SELECT $select_list, _path AS source_file
FROM $source_function
WHERE throwIf(organization_id != {organization_id:String} OR brand_id != {brand_id:String},
              'refused: a row belongs to another tenant than the partition''s') = 0
  AND throwIf(toDate(event_timestamp, 'UTC') != {partition_date:Date},
              'refused: a row''s event_timestamp is outside the partition''s UTC day') = 0
  AND throwIf(lower(trim(event_type)) NOT IN {event_types:Array(String)},
              'refused: a row has an event_type this domain does not define') = 0
  AND throwIf(event_id IS NULL OR event_id = '', 'refused: a row has no event_id') = 0
SETTINGS $settings
