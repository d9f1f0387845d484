-- 021-condense, plain PostgreSQL: the hour tiers are tables; _measure.condense recomputes
-- exactly the hours that _measure.note_intervals marked dirty (API: 020-tiers.sql).

-- Each *_hour_rows function groups a batch of interval records (a day of 1,856 processes:
-- 2.7 million) into hour rows. Sorting them for the grouping spilled about 1 GB to disk, so
-- the functions aggregate by hashing, in memory (tens of MB per day of 2,000 entities):
-- work_mem and enable_sort are set for these functions only.

-- The cpu hour rows of the given UTC hours (the same SELECT as the TimescaleDB
-- continuous aggregate _measure.cpu_hour; tests/schema/test_tiers.py compares them).
CREATE OR REPLACE FUNCTION _measure.cpu_hour_rows(p_system smallint, p_hours timestamptz[])
RETURNS SETOF _measure.cpu_hour LANGUAGE sql STABLE
SET work_mem = '256MB' SET enable_sort = off AS $$
SELECT system_id, entity_id, measurement_id,
       date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS hour_at,
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
   AND system_id = p_system
   AND from_at >= (SELECT min(h) FROM unnest(p_hours) h)
   AND from_at < (SELECT max(h) FROM unnest(p_hours) h) + INTERVAL '1 hour'
   AND date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') = ANY (p_hours)
 GROUP BY system_id, entity_id, measurement_id, hour_at
$$;
GRANT EXECUTE ON FUNCTION _measure.cpu_hour_rows(smallint, timestamptz[]) TO measure_writer;

-- The disc hour rows of the given UTC hours (the same SELECT as the TimescaleDB
-- continuous aggregate _measure.disc_hour; tests/schema/test_tiers.py compares them).
CREATE OR REPLACE FUNCTION _measure.disc_hour_rows(p_system smallint, p_hours timestamptz[])
RETURNS SETOF _measure.disc_hour LANGUAGE sql STABLE
SET work_mem = '256MB' SET enable_sort = off AS $$
SELECT system_id, entity_id, measurement_id,
       date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS hour_at,
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
   AND system_id = p_system
   AND from_at >= (SELECT min(h) FROM unnest(p_hours) h)
   AND from_at < (SELECT max(h) FROM unnest(p_hours) h) + INTERVAL '1 hour'
   AND date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') = ANY (p_hours)
 GROUP BY system_id, entity_id, measurement_id, hour_at
$$;
GRANT EXECUTE ON FUNCTION _measure.disc_hour_rows(smallint, timestamptz[]) TO measure_writer;

-- The line hour rows of the given UTC hours (the same SELECT as the TimescaleDB
-- continuous aggregate _measure.line_hour; tests/schema/test_tiers.py compares them).
CREATE OR REPLACE FUNCTION _measure.line_hour_rows(p_system smallint, p_hours timestamptz[])
RETURNS SETOF _measure.line_hour LANGUAGE sql STABLE
SET work_mem = '256MB' SET enable_sort = off AS $$
SELECT system_id, entity_id, measurement_id,
       date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS hour_at,
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
   AND system_id = p_system
   AND from_at >= (SELECT min(h) FROM unnest(p_hours) h)
   AND from_at < (SELECT max(h) FROM unnest(p_hours) h) + INTERVAL '1 hour'
   AND date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') = ANY (p_hours)
 GROUP BY system_id, entity_id, measurement_id, hour_at
$$;
GRANT EXECUTE ON FUNCTION _measure.line_hour_rows(smallint, timestamptz[]) TO measure_writer;

-- The process hour rows of the given UTC hours (the same SELECT as the TimescaleDB
-- continuous aggregate _measure.process_hour; tests/schema/test_tiers.py compares them).
CREATE OR REPLACE FUNCTION _measure.process_hour_rows(p_system smallint, p_hours timestamptz[])
RETURNS SETOF _measure.process_hour LANGUAGE sql STABLE
SET work_mem = '256MB' SET enable_sort = off AS $$
SELECT system_id, entity_id, measurement_id,
       date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS hour_at,
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
   AND system_id = p_system
   AND from_at >= (SELECT min(h) FROM unnest(p_hours) h)
   AND from_at < (SELECT max(h) FROM unnest(p_hours) h) + INTERVAL '1 hour'
   AND date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') = ANY (p_hours)
 GROUP BY system_id, entity_id, measurement_id, hour_at
$$;
GRANT EXECUTE ON FUNCTION _measure.process_hour_rows(smallint, timestamptz[]) TO measure_writer;

-- The userdef hour rows of the given UTC hours (the same SELECT as the TimescaleDB
-- continuous aggregate _measure.userdef_hour; tests/schema/test_tiers.py compares them).
CREATE OR REPLACE FUNCTION _measure.userdef_hour_rows(p_system smallint, p_hours timestamptz[])
RETURNS SETOF _measure.userdef_hour LANGUAGE sql STABLE
SET work_mem = '256MB' SET enable_sort = off AS $$
SELECT system_id, entity_id, measurement_id,
       date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS hour_at,
       min(cpu) AS cpu, count(*) AS samples, sum(delta_us) AS elapsed_us,
       min(from_at) AS first_from_at, max(to_at) AS last_to_at,
       sum(greatest(counters[1] /* userdef.time_value */, 0)) AS value_sum,
       min(1000000.0 * greatest(counters[1] /* userdef.time_value */, 0) / delta_us) AS value_min,
       max(1000000.0 * greatest(counters[1] /* userdef.time_value */, 0) / delta_us) AS value_max
  FROM _measure.interval_record
 WHERE type_code = 4
   AND system_id = p_system
   AND from_at >= (SELECT min(h) FROM unnest(p_hours) h)
   AND from_at < (SELECT max(h) FROM unnest(p_hours) h) + INTERVAL '1 hour'
   AND date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') = ANY (p_hours)
 GROUP BY system_id, entity_id, measurement_id, hour_at
$$;
GRANT EXECUTE ON FUNCTION _measure.userdef_hour_rows(smallint, timestamptz[]) TO measure_writer;

-- The tmf hour rows of the given UTC hours (the same SELECT as the TimescaleDB
-- continuous aggregate _measure.tmf_hour; tests/schema/test_tiers.py compares them).
CREATE OR REPLACE FUNCTION _measure.tmf_hour_rows(p_system smallint, p_hours timestamptz[])
RETURNS SETOF _measure.tmf_hour LANGUAGE sql STABLE
SET work_mem = '256MB' SET enable_sort = off AS $$
SELECT system_id, entity_id, measurement_id,
       date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS hour_at,
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
   AND system_id = p_system
   AND from_at >= (SELECT min(h) FROM unnest(p_hours) h)
   AND from_at < (SELECT max(h) FROM unnest(p_hours) h) + INTERVAL '1 hour'
   AND date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') = ANY (p_hours)
 GROUP BY system_id, entity_id, measurement_id, hour_at
$$;
GRANT EXECUTE ON FUNCTION _measure.tmf_hour_rows(smallint, timestamptz[]) TO measure_writer;

-- Condense the dirty hours (all systems, or one): hour tiers from interval records, then
-- the shifts, months and years containing them. At most p_limit hours per system per
-- call, oldest first; returns the number of hours condensed.
CREATE OR REPLACE FUNCTION _measure.condense(p_system smallint DEFAULT NULL,
                                             p_limit integer DEFAULT 2000)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint;
    v_hours timestamptz[];
    v_total integer := 0;
BEGIN
    FOR v_sys IN SELECT DISTINCT system_id FROM _measure.tier_dirty
                  WHERE p_system IS NULL OR system_id = p_system ORDER BY 1 LOOP
        SELECT array_agg(hour_at ORDER BY hour_at) INTO v_hours
          FROM (SELECT hour_at FROM _measure.tier_dirty WHERE system_id = v_sys
                 ORDER BY hour_at LIMIT p_limit FOR UPDATE SKIP LOCKED) d;
        CONTINUE WHEN v_hours IS NULL;
        DELETE FROM _measure.cpu_hour WHERE system_id = v_sys AND hour_at = ANY (v_hours);
        INSERT INTO _measure.cpu_hour SELECT * FROM _measure.cpu_hour_rows(v_sys, v_hours);
        DELETE FROM _measure.disc_hour WHERE system_id = v_sys AND hour_at = ANY (v_hours);
        INSERT INTO _measure.disc_hour SELECT * FROM _measure.disc_hour_rows(v_sys, v_hours);
        DELETE FROM _measure.line_hour WHERE system_id = v_sys AND hour_at = ANY (v_hours);
        INSERT INTO _measure.line_hour SELECT * FROM _measure.line_hour_rows(v_sys, v_hours);
        DELETE FROM _measure.process_hour WHERE system_id = v_sys AND hour_at = ANY (v_hours);
        INSERT INTO _measure.process_hour SELECT * FROM _measure.process_hour_rows(v_sys, v_hours);
        DELETE FROM _measure.userdef_hour WHERE system_id = v_sys AND hour_at = ANY (v_hours);
        INSERT INTO _measure.userdef_hour SELECT * FROM _measure.userdef_hour_rows(v_sys, v_hours);
        DELETE FROM _measure.tmf_hour WHERE system_id = v_sys AND hour_at = ANY (v_hours);
        INSERT INTO _measure.tmf_hour SELECT * FROM _measure.tmf_hour_rows(v_sys, v_hours);
        PERFORM _measure.condense_upper(v_sys, v_hours);
        DELETE FROM _measure.tier_dirty WHERE system_id = v_sys AND hour_at = ANY (v_hours);
        v_total := v_total + cardinality(v_hours);
    END LOOP;
    RETURN v_total;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.condense(smallint, integer) TO measure_writer;

-- Mark a period dirty again and condense it (after editing _measure.shift, say).
CREATE OR REPLACE FUNCTION _measure.recondense(p_system smallint, p_from timestamptz, p_to timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
    PERFORM _measure.note_intervals(p_system, p_from, p_to);
    RETURN _measure.condense(p_system, 1000000);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.recondense(smallint, timestamptz, timestamptz) TO measure_writer;

-- Retention (the scheduler calls it daily): drop raw copies and interval records older
-- than p_older_than, only when all their tiers are computed. The tiers are kept.
CREATE OR REPLACE FUNCTION _measure.purge(p_older_than interval, p_now timestamptz DEFAULT now())
RETURNS TABLE (counter_copies bigint, interval_records bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_cutoff timestamptz := p_now - p_older_than;
    v_why text;
BEGIN
    IF p_older_than < INTERVAL '1 day' THEN
        RAISE EXCEPTION 'purge: keep at least one day of raw data (asked for %)', p_older_than;
    END IF;
    v_why := _measure.purge_blocker(v_cutoff);
    IF v_why IS NOT NULL THEN
        RAISE EXCEPTION 'purge refused: %', v_why USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    DELETE FROM _measure.counter_copy WHERE copy_at < v_cutoff;
    GET DIAGNOSTICS counter_copies = ROW_COUNT;
    DELETE FROM _measure.interval_record WHERE from_at < v_cutoff;
    GET DIAGNOSTICS interval_records = ROW_COUNT;
    RETURN NEXT;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.purge(interval, timestamptz) TO measure_writer;
