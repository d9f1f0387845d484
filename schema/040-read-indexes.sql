-- 040-read-indexes: indexes the MEASREAD reads of the API need (collector/measure/read.py).
--
-- The primary key (measurement_id, entity_id, record_at, from_at) already serves the
-- "latest record per entity" read and the window sums. Two reads need more:
--
--   nearest (MEASREAD nomtime/timetol): per entity, the record whose TO-TIMESTAMP is
--       closest to a target time = two probes, the last record ending at or before it and
--       the first one ending after it. Without this index an untolerated read scanned every
--       record of the entity (a week of minute intervals: 10,080 rows per CPU).
--   intervals (LISTALL): keyset pages in (from_at, entity_id, record_at) order within one
--       measurement and entity type; the index gives that order directly, so a page costs
--       its own rows instead of a sort of the whole window.
--
-- Plain B-tree indexes, not unique: valid on a TimescaleDB hypertable as they are (created
-- on every chunk, existing and future), and on plain PostgreSQL.

CREATE INDEX IF NOT EXISTS interval_record_measurement_entity_to_idx
    ON _measure.interval_record (measurement_id, entity_id, to_at);

CREATE INDEX IF NOT EXISTS interval_record_measurement_type_from_idx
    ON _measure.interval_record (measurement_id, type_code, from_at, entity_id, record_at);
