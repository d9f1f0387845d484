-- 000-foundation, TimescaleDB branch: the two time-series tables become hypertables with
-- native compression. Retention is added with the tiers (it must never drop data whose
-- tiers are incomplete). Chunks of one day suit a minute interval on a 16-CPU node
-- (a few million interval records a day).

SELECT create_hypertable('_measure.counter_copy', by_range('copy_at', INTERVAL '1 day'),
                         if_not_exists => true);
SELECT create_hypertable('_measure.interval_record', by_range('from_at', INTERVAL '1 day'),
                         if_not_exists => true);

ALTER TABLE _measure.counter_copy SET (
    timescaledb.compress,
    timescaledb.compress_segmentby = 'system_id, type_code',
    timescaledb.compress_orderby = 'entity_id, record_at, copy_at, copy_kind'
);
ALTER TABLE _measure.interval_record SET (
    timescaledb.compress,
    timescaledb.compress_segmentby = 'system_id, type_code',
    timescaledb.compress_orderby = 'entity_id, record_at, from_at'
);
SELECT add_compression_policy('_measure.counter_copy', compress_after => INTERVAL '7 days',
                              if_not_exists => true);
SELECT add_compression_policy('_measure.interval_record', compress_after => INTERVAL '7 days',
                              if_not_exists => true);
