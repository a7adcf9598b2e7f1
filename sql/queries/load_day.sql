-- One tenant-day of one domain, read and inserted inside ClickHouse: no row passes through Python.
-- Dollar placeholders are identifiers and expressions built from the domain registry and the row
-- rules (atlas_dagster/validation/rows.py); {name:Type} are bound parameters. Required columns are
-- read non-Nullable with input_format_null_as_default = 0, so a null refuses the day instead of
-- becoming an empty string or 0; each guard (a throwIf) refuses it at the first row breaking
-- another rule. $folder_columns is empty, or a WITH naming the columns the files hold only in
-- their folder names (organization_id=…/), read from each row's _path.
INSERT INTO atlas.$inbound_table ($columns)
$folder_columns
SELECT $select_list, _path AS source_file
FROM $source_function
WHERE $guards
SETTINGS $settings
