-- 010-tiers, TimescaleDB branch: the hour tiers are continuous aggregates straight on the
-- interval_record hypertable, materialized only (no real-time union: reports read what is
-- condensed, the API reads live data from interval records explicitly) and created WITH NO
-- DATA: this file runs inside the schema runner's single transaction, where WITH DATA (an
-- implicit refresh) is refused.
--
-- They have NO refresh policy. The only refresher is the tiers job (_measure.tiers_job,
-- schema/idempotent/021-condense.timescale.sql), which refreshes exactly the hours that
-- _measure.note_intervals marked in _measure.tier_dirty, as the plain branch's
-- _measure.condense recomputes exactly those hours. Two reasons: (1) since TimescaleDB
-- 2.2x a refresh whose window overlaps a running refresh of the same aggregate fails
-- with an error (timescaledb#9248, #9571), so a policy over "the last 7 days" and the
-- tiers job would make each other fail whenever they meet; (2) a refresh over raw chunks
-- that retention dropped deletes the aggregate rows there (TimescaleDB docs, "data
-- retention with continuous aggregates"), so the tiers would depend on a policy window
-- staying shorter than the retention. Hours are refreshed only when noted.
--
-- The expressions inline the RATE ON formulas of measure.busy_percent / avg_queue_length /
-- per_second (schema/idempotent/010-interface.sql): idempotent files run after versioned
-- ones, so a continuous aggregate cannot call them (and every function in a continuous
-- aggregate must be immutable: time_bucket, greatest, casts and arithmetic are). The
-- plain branch uses the very same SELECT (tests/schema/test_tiers.py compares both;
-- tests/schema/test_timescale_branch.py checks the continuous-aggregate rules).
--
-- Shift, month and year tiers are NOT continuous aggregates: their buckets depend on each
-- system's time zone and on its shift table (data), which time_bucket cannot express
-- (it needs a constant time zone and regular widths). They are tables shared with the
-- plain branch, recomputed by _measure.condense_upper for exactly the dirty hours, run by
-- the tiers job after refreshing the hour aggregates. The jobs (tiers, purge) are
-- registered by schema/idempotent/021-condense.timescale.sql, once, after their bodies.

CREATE MATERIALIZED VIEW _measure.cpu_hour
WITH (timescaledb.continuous, timescaledb.materialized_only = true) AS
SELECT system_id, entity_id, measurement_id,
       time_bucket(INTERVAL '1 hour', from_at) AS hour_at,
       min(cpu) AS cpu, count(*) AS samples, sum(delta_us) AS elapsed_us,
       min(from_at) AS first_from_at, max(to_at) AS last_to_at,
       sum(greatest(counters[1] /* cpu.cpu_busy_time */, 0)) AS busy_us,
       min(100.0 * greatest(counters[1] /* cpu.cpu_busy_time */, 0) / delta_us) AS busy_min,
       max(100.0 * greatest(counters[1] /* cpu.cpu_busy_time */, 0) / delta_us) AS busy_max,
       sum(greatest(counters[2] /* cpu.cpu_qtime */, 0)) AS qlen_us,
       min(greatest(counters[2] /* cpu.cpu_qtime */, 0)::numeric / delta_us) AS qlen_min,
       max(greatest(counters[2] /* cpu.cpu_qtime */, 0)::numeric / delta_us) AS qlen_max,
       sum(greatest(counters[4] /* cpu.mem_qtime */, 0)) AS mqlen_us,
       min(greatest(counters[4] /* cpu.mem_qtime */, 0)::numeric / delta_us) AS mqlen_min,
       max(greatest(counters[4] /* cpu.mem_qtime */, 0)::numeric / delta_us) AS mqlen_max,
       sum(greatest(counters[7] /* cpu.swaps */, 0)) AS swaps,
       min(1000000.0 * greatest(counters[7] /* cpu.swaps */, 0) / delta_us) AS swap_min,
       max(1000000.0 * greatest(counters[7] /* cpu.swaps */, 0) / delta_us) AS swap_max,
       sum(greatest(counters[8] /* cpu.intr_busy_time */, 0)) AS ibusy_us,
       min(100.0 * greatest(counters[8] /* cpu.intr_busy_time */, 0) / delta_us) AS ibusy_min,
       max(100.0 * greatest(counters[8] /* cpu.intr_busy_time */, 0) / delta_us) AS ibusy_max,
       sum(greatest(counters[10] /* cpu.send_busy_time */, 0)) AS sbusy_us,
       min(100.0 * greatest(counters[10] /* cpu.send_busy_time */, 0) / delta_us) AS sbusy_min,
       max(100.0 * greatest(counters[10] /* cpu.send_busy_time */, 0) / delta_us) AS sbusy_max,
       sum(greatest(counters[6] /* cpu.dispatches */, 0)) AS dispatches,
       sum(greatest(counters[9] /* cpu.process_ovhd */, 0)) AS process_ovhd_us,
       sum(greatest(counters[11] /* cpu.disc_ios */, 0)) AS disc_ios,
       sum(greatest(counters[12] /* cpu.cache_hits */, 0)) AS cache_hits,
       sum(greatest(counters[13] /* cpu.transactions */, 0)) AS transactions,
       sum(greatest(counters[14] /* cpu.response_time */, 0)) AS response_us
  FROM _measure.interval_record
 WHERE type_code = 1
 GROUP BY system_id, entity_id, measurement_id, hour_at
WITH NO DATA;
CREATE INDEX cpu_hour_system_hour_idx ON _measure.cpu_hour (system_id, hour_at);
GRANT SELECT ON _measure.cpu_hour TO measure_writer;

CREATE MATERIALIZED VIEW _measure.disc_hour
WITH (timescaledb.continuous, timescaledb.materialized_only = true) AS
SELECT system_id, entity_id, measurement_id,
       time_bucket(INTERVAL '1 hour', from_at) AS hour_at,
       min(cpu) AS cpu, count(*) AS samples, sum(delta_us) AS elapsed_us,
       min(from_at) AS first_from_at, max(to_at) AS last_to_at,
       sum(greatest(counters[12] /* disc.device_qbusy_time */, 0)) AS busy_us,
       min(100.0 * greatest(counters[12] /* disc.device_qbusy_time */, 0) / delta_us) AS busy_min,
       max(100.0 * greatest(counters[12] /* disc.device_qbusy_time */, 0) / delta_us) AS busy_max,
       sum(greatest(counters[2] /* disc.request_qtime */, 0)) AS qlen_us,
       min(greatest(counters[2] /* disc.request_qtime */, 0)::numeric / delta_us) AS qlen_min,
       max(greatest(counters[2] /* disc.request_qtime */, 0)::numeric / delta_us) AS qlen_max,
       sum(greatest(counters[15] /* disc.seek_busy_time */, 0)) AS seek_busy_us,
       min(100.0 * greatest(counters[15] /* disc.seek_busy_time */, 0) / delta_us) AS seek_busy_min,
       max(100.0 * greatest(counters[15] /* disc.seek_busy_time */, 0) / delta_us) AS seek_busy_max,
       sum(greatest(counters[14] /* disc.write_busy_time */, 0)) AS write_busy_us,
       min(100.0 * greatest(counters[14] /* disc.write_busy_time */, 0) / delta_us) AS write_busy_min,
       max(100.0 * greatest(counters[14] /* disc.write_busy_time */, 0) / delta_us) AS write_busy_max,
       sum(greatest(counters[1] /* disc.requests */, 0)) AS requests,
       sum(greatest(counters[4] /* disc.reads */, 0)) AS reads,
       sum(greatest(counters[5] /* disc.writes */, 0)) AS writes,
       sum(greatest(counters[6] /* disc.input_bytes */, 0)) AS input_bytes,
       sum(greatest(counters[7] /* disc.output_bytes */, 0)) AS output_bytes,
       sum(greatest(counters[17] /* disc.cache_hits */, 0)) AS cache_hits,
       sum(greatest(counters[18] /* disc.cache_misses */, 0)) AS cache_misses,
       sum(greatest(counters[20] /* disc.block_splits */, 0)) AS block_splits
  FROM _measure.interval_record
 WHERE type_code = 7
 GROUP BY system_id, entity_id, measurement_id, hour_at
WITH NO DATA;
CREATE INDEX disc_hour_system_hour_idx ON _measure.disc_hour (system_id, hour_at);
GRANT SELECT ON _measure.disc_hour TO measure_writer;

CREATE MATERIALIZED VIEW _measure.line_hour
WITH (timescaledb.continuous, timescaledb.materialized_only = true) AS
SELECT system_id, entity_id, measurement_id,
       time_bucket(INTERVAL '1 hour', from_at) AS hour_at,
       min(cpu) AS cpu, count(*) AS samples, sum(delta_us) AS elapsed_us,
       min(from_at) AS first_from_at, max(to_at) AS last_to_at,
       sum(greatest(counters[1] /* line.read_busy_time */, 0)) AS read_busy_us,
       min(100.0 * greatest(counters[1] /* line.read_busy_time */, 0) / delta_us) AS read_busy_min,
       max(100.0 * greatest(counters[1] /* line.read_busy_time */, 0) / delta_us) AS read_busy_max,
       sum(greatest(counters[2] /* line.write_busy_time */, 0)) AS write_busy_us,
       min(100.0 * greatest(counters[2] /* line.write_busy_time */, 0) / delta_us) AS write_busy_min,
       max(100.0 * greatest(counters[2] /* line.write_busy_time */, 0) / delta_us) AS write_busy_max,
       sum(greatest(counters[3] /* line.requests */, 0)) AS requests,
       sum(greatest(counters[4] /* line.reads */, 0)) AS reads,
       sum(greatest(counters[5] /* line.writes */, 0)) AS writes,
       sum(greatest(counters[7] /* line.input_bytes */, 0)) AS input_bytes,
       sum(greatest(counters[8] /* line.output_bytes */, 0)) AS output_bytes,
       sum(greatest(counters[11] /* line.transactions */, 0)) AS transactions,
       sum(greatest(counters[12] /* line.response_time */, 0)) AS response_us
  FROM _measure.interval_record
 WHERE type_code = 9
 GROUP BY system_id, entity_id, measurement_id, hour_at
WITH NO DATA;
CREATE INDEX line_hour_system_hour_idx ON _measure.line_hour (system_id, hour_at);
GRANT SELECT ON _measure.line_hour TO measure_writer;

CREATE MATERIALIZED VIEW _measure.process_hour
WITH (timescaledb.continuous, timescaledb.materialized_only = true) AS
SELECT system_id, entity_id, measurement_id,
       time_bucket(INTERVAL '1 hour', from_at) AS hour_at,
       min(cpu) AS cpu, count(*) AS samples, sum(delta_us) AS elapsed_us,
       min(from_at) AS first_from_at, max(to_at) AS last_to_at,
       sum(greatest(counters[1] /* process.cpu_busy_time */, 0)) AS busy_us,
       min(100.0 * greatest(counters[1] /* process.cpu_busy_time */, 0) / delta_us) AS busy_min,
       max(100.0 * greatest(counters[1] /* process.cpu_busy_time */, 0) / delta_us) AS busy_max,
       sum(greatest(counters[2] /* process.ready_time */, 0)) AS ready_us,
       sum(greatest(counters[15] /* process.recv_qtime */, 0)) AS pqlen_us,
       min(greatest(counters[15] /* process.recv_qtime */, 0)::numeric / delta_us) AS pqlen_min,
       max(greatest(counters[15] /* process.recv_qtime */, 0)::numeric / delta_us) AS pqlen_max,
       sum(greatest(counters[17] /* process.vsems */, 0)) AS vsems,
       min(1000000.0 * greatest(counters[17] /* process.vsems */, 0) / delta_us) AS vsem_min,
       max(1000000.0 * greatest(counters[17] /* process.vsems */, 0) / delta_us) AS vsem_max,
       sum(greatest(counters[3] /* process.dispatches */, 0)) AS dispatches,
       sum(greatest(counters[5] /* process.page_faults */, 0)) AS page_faults,
       sum(greatest(counters[6] /* process.messages_sent */, 0)) AS messages_sent,
       sum(greatest(counters[7] /* process.messages_received */, 0)) AS messages_received
  FROM _measure.interval_record
 WHERE type_code = 2
 GROUP BY system_id, entity_id, measurement_id, hour_at
WITH NO DATA;
CREATE INDEX process_hour_system_hour_idx ON _measure.process_hour (system_id, hour_at);
GRANT SELECT ON _measure.process_hour TO measure_writer;

CREATE MATERIALIZED VIEW _measure.userdef_hour
WITH (timescaledb.continuous, timescaledb.materialized_only = true) AS
SELECT system_id, entity_id, measurement_id,
       time_bucket(INTERVAL '1 hour', from_at) AS hour_at,
       min(cpu) AS cpu, count(*) AS samples, sum(delta_us) AS elapsed_us,
       min(from_at) AS first_from_at, max(to_at) AS last_to_at,
       sum(greatest(counters[1] /* userdef.time_value */, 0)) AS value_sum,
       min(1000000.0 * greatest(counters[1] /* userdef.time_value */, 0) / delta_us) AS value_min,
       max(1000000.0 * greatest(counters[1] /* userdef.time_value */, 0) / delta_us) AS value_max
  FROM _measure.interval_record
 WHERE type_code = 4
 GROUP BY system_id, entity_id, measurement_id, hour_at
WITH NO DATA;
CREATE INDEX userdef_hour_system_hour_idx ON _measure.userdef_hour (system_id, hour_at);
GRANT SELECT ON _measure.userdef_hour TO measure_writer;

CREATE MATERIALIZED VIEW _measure.tmf_hour
WITH (timescaledb.continuous, timescaledb.materialized_only = true) AS
SELECT system_id, entity_id, measurement_id,
       time_bucket(INTERVAL '1 hour', from_at) AS hour_at,
       min(cpu) AS cpu, count(*) AS samples, sum(delta_us) AS elapsed_us,
       min(from_at) AS first_from_at, max(to_at) AS last_to_at,
       sum(greatest(counters[1] /* tmf.home_trans */, 0)) AS home_trans,
       min(1000000.0 * greatest(counters[1] /* tmf.home_trans */, 0) / delta_us) AS trans_min,
       max(1000000.0 * greatest(counters[1] /* tmf.home_trans */, 0) / delta_us) AS trans_max,
       sum(greatest(counters[2] /* tmf.home_trans_qtime */, 0)) AS home_trans_us,
       sum(greatest(counters[7] /* tmf.remote_trans */, 0)) AS remote_trans,
       sum(greatest(counters[10] /* tmf.aborting_trans */, 0)) AS aborting_trans
  FROM _measure.interval_record
 WHERE type_code = 14
 GROUP BY system_id, entity_id, measurement_id, hour_at
WITH NO DATA;
CREATE INDEX tmf_hour_system_hour_idx ON _measure.tmf_hour (system_id, hour_at);
GRANT SELECT ON _measure.tmf_hour TO measure_writer;
