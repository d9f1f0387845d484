-- 070-tiers-upkeep, TimescaleDB branch: a compression order that covers the primary keys.
--
-- 000-foundation.timescale.sql compresses the raw tables segmented by (system_id, type_code)
-- and ordered by (entity_id, record_at, ...), which leaves measurement_id, the first column
-- of both primary keys, out: TimescaleDB warns "column measurement_id should be used for
-- segmenting or ordering", and a row written into an already compressed chunk (a spool replay
-- or late data more than 7 days old) has its key checked by decompressing every batch of its
-- (system, entity type) segment for that day. With measurement_id first in the order every
-- key column is a segmentby or orderby column, whose min/max per batch narrow the check to
-- the batches that can hold the key (TimescaleDB docs, "hypertables and unique indexes").
--
-- Only while no chunk is compressed yet (a new database, or one younger than the 7-day
-- compression policy): the settings of a chunk are fixed when it is compressed, and
-- recompressing a chunk compressed under the old order after the order changed has failed in
-- 2.2x (a column that had a bloom sparse index cannot become an orderby column; a changed
-- order was not applied by in-memory recompression: timescaledb#9111, #10058). A database
-- that already compressed chunks keeps the 000 settings (correct, only slower for late rows
-- into compressed chunks) and says so.
DO $order$
BEGIN
    IF EXISTS (SELECT 1 FROM timescaledb_information.chunks c
                WHERE c.hypertable_schema = '_measure'
                  AND c.hypertable_name IN ('counter_copy', 'interval_record') AND c.is_compressed) THEN
        RAISE NOTICE 'compressed chunks exist: the compression order of _measure.counter_copy and '
                     '_measure.interval_record is kept (see schema/070-tiers-upkeep.timescale.sql)';
        RETURN;
    END IF;
    ALTER TABLE _measure.counter_copy SET (
        timescaledb.compress,
        timescaledb.compress_segmentby = 'system_id, type_code',
        timescaledb.compress_orderby = 'measurement_id, entity_id, record_at, copy_at, copy_kind'
    );
    ALTER TABLE _measure.interval_record SET (
        timescaledb.compress,
        timescaledb.compress_segmentby = 'system_id, type_code',
        timescaledb.compress_orderby = 'measurement_id, entity_id, record_at, from_at'
    );
END
$order$;
