-- 020-tiers: the performance data base (ENFORM Figures 5-8), shared by both branches.
-- Storage and the design notes (buckets, time zones, double counting) are in
-- schema/010-tiers.sql.
--
-- The collector's API (called by measure_writer after every COPY slice):
--
--   SELECT _measure.note_intervals(system_id, from_at_min, from_at_max);
--       marks every UTC hour in [date_bin(from_at_min), from_at_max] dirty for that system
--       (late data and spool replays included); returns the number of hours marked.
--   SELECT _measure.condense();            -- or _measure.condense(system_id)
--       recomputes exactly the dirty hours (hour tiers from the interval runs, then the
--       shifts, months and years that contain them) and clears them; returns the number of
--       hours condensed. Both engines, in the caller's transaction (021-condense.sql).
--   SELECT _measure.recondense(system_id, from_at, to_at);
--       marks a period dirty again and condenses it (hours before the retention horizons:
--       only what the kept tiers below them allow). Calendar changes (shifts per weekday,
--       holidays, versions, a system's time zone) go through schema/idempotent/050-config.sql,
--       which recondenses exactly the shift days they change.
--   Retention (026-retention.sql) drops whole days of runs and old tier rows, never an hour
--   that is still dirty; what it removed is kept in _measure.purged: a class is never
--   recomputed before its horizon from the class below (their tiers stay as condensed).
--
-- Readers use the measure.* views: <entity>_hour, <entity>_shift, <entity>_month,
-- <entity>_year for each entity type with tiers (_measure.tiered_entities(): the catalogue's
-- cpu, disc, line, process, userdef, tmf).

-- ---------------------------------------------------------------- shifts (the calendar)

-- The base shifts of each system: its own rows of _measure.shift, or the defaults (system_id
-- NULL). They apply every day before the system's first calendar version (_measure.calendar,
-- schema/110-calendar.sql) and are all there is for a system that has none.
CREATE OR REPLACE VIEW _measure.system_shift AS
SELECT s.system_id, s.time_zone, sh.shift_no, sh.begin_time, sh.end_time, sh.name,
       sh.end_time <= sh.begin_time AS crosses_midnight
  FROM _measure.system s
  JOIN _measure.shift sh
    ON sh.system_id = s.system_id
    OR (sh.system_id IS NULL
        AND NOT EXISTS (SELECT 1 FROM _measure.shift o WHERE o.system_id = s.system_id));
GRANT SELECT ON _measure.system_shift TO measure_writer;

-- The shifts of each shift day in [p_first, p_last] of one system, as offsets from the day's
-- local midnight (a shift that crosses midnight ends after 24 hours): the calendar version in
-- force that day (the newest with effective_from <= the day) and its shifts of the day's ISO
-- weekday, or the base shifts before the first version. A holiday (_measure.holiday) keeps
-- the span of the day's shifts (first begin to last end) as the version's holiday shift, or
-- has no shift at all (no version, or a version without a holiday shift).
CREATE OR REPLACE FUNCTION _measure.calendar_days(p_system smallint, p_first date, p_last date)
RETURNS TABLE (shift_day date, shift_no smallint, name text, begin_off interval, end_off interval,
               holiday boolean)
LANGUAGE sql STABLE AS $$
    WITH d AS MATERIALIZED (
        SELECT g::date AS day,
               (SELECT c.calendar_id FROM _measure.calendar c
                 WHERE c.system_id = p_system AND c.effective_from <= g::date
                 ORDER BY c.effective_from DESC LIMIT 1) AS cal,
               EXISTS (SELECT 1 FROM _measure.holiday h WHERE h.system_id = p_system AND h.day = g::date) AS holiday
          FROM generate_series(p_first, p_last, INTERVAL '1 day') g),
    o AS (
        SELECT x.day, x.cal, x.holiday, x.shift_no, x.name, x.begin_time - time '00:00' AS begin_off,
               CASE WHEN x.end_time <= x.begin_time THEN INTERVAL '24 hours' ELSE INTERVAL '0' END
                   + (x.end_time - time '00:00') AS end_off
          FROM (SELECT d.day, d.cal, d.holiday, ss.shift_no, ss.name, ss.begin_time, ss.end_time
                  FROM d JOIN _measure.system_shift ss ON ss.system_id = p_system
                 WHERE d.cal IS NULL
                UNION ALL
                SELECT d.day, d.cal, d.holiday, cs.shift_no, cs.name, cs.begin_time, cs.end_time
                  FROM d JOIN _measure.calendar_shift cs
                    ON cs.calendar_id = d.cal AND cs.weekday = extract(isodow FROM d.day)) x)
    SELECT o.day, o.shift_no, o.name, o.begin_off, o.end_off, false FROM o WHERE NOT o.holiday
    UNION ALL
    SELECT o.day, c.holiday_shift, c.holiday_name, min(o.begin_off), max(o.end_off), true
      FROM o JOIN _measure.calendar c ON c.calendar_id = o.cal
     WHERE o.holiday AND c.holiday_shift IS NOT NULL
     GROUP BY o.day, c.holiday_shift, c.holiday_name
$$;
GRANT EXECUTE ON FUNCTION _measure.calendar_days(smallint, date, date) TO measure_writer;

-- The shifts of the shift days [p_first, p_last] as real instants (a DST change makes a shift
-- 7 or 9 hours long). A shift never runs past the first shift of the next shift day: where two
-- calendar versions meet (a night shift of the old one crossing into a day the new one starts
-- at midnight), the earlier shift ends where the later one begins.
CREATE OR REPLACE FUNCTION _measure.calendar_instances(p_system smallint, p_first date, p_last date)
RETURNS TABLE (shift_day date, shift_no smallint, start_at timestamptz, end_at timestamptz)
LANGUAGE sql STABLE AS $$
    WITH c AS MATERIALIZED (
        SELECT d.shift_day, d.shift_no, (d.shift_day + d.begin_off) AT TIME ZONE s.time_zone AS start_at,
               (d.shift_day + d.end_off) AT TIME ZONE s.time_zone AS end_at
          FROM _measure.calendar_days(p_system, p_first, p_last + 1) d
          JOIN _measure.system s ON s.system_id = p_system),
    nxt AS (SELECT c.shift_day - 1 AS shift_day, min(c.start_at) AS first_start FROM c GROUP BY c.shift_day)
    SELECT c.shift_day, c.shift_no, c.start_at, least(c.end_at, n.first_start)
      FROM c LEFT JOIN nxt n ON n.shift_day = c.shift_day
     WHERE c.shift_day <= p_last AND least(c.end_at, n.first_start) > c.start_at
$$;
GRANT EXECUTE ON FUNCTION _measure.calendar_instances(smallint, date, date) TO measure_writer;

-- Every shift of the system that overlaps [p_from, p_to) (finite bounds).
CREATE OR REPLACE FUNCTION _measure.shifts_between(p_system smallint, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (shift_day date, shift_no smallint, start_at timestamptz, end_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT i.shift_day, i.shift_no, i.start_at, i.end_at
      FROM _measure.system s
     CROSS JOIN LATERAL _measure.calendar_instances(s.system_id, (p_from AT TIME ZONE s.time_zone)::date - 1,
                                                    (p_to AT TIME ZONE s.time_zone)::date) i
     WHERE s.system_id = p_system AND i.start_at < p_to AND i.end_at > p_from
$$;
GRANT EXECUTE ON FUNCTION _measure.shifts_between(smallint, timestamptz, timestamptz) TO measure_writer;

-- The shifts that contain at least one of the given UTC hours (each hour start lies in at
-- most one shift: [start_at, end_at)).
CREATE OR REPLACE FUNCTION _measure.shifts_of_hours(p_system smallint, p_hours timestamptz[])
RETURNS TABLE (shift_day date, shift_no smallint, start_at timestamptz, end_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT DISTINCT i.shift_day, i.shift_no, i.start_at, i.end_at
      FROM _measure.shifts_between(p_system, (SELECT min(h) FROM unnest(p_hours) h),
                                   (SELECT max(h) FROM unnest(p_hours) h) + INTERVAL '1 hour') i
     CROSS JOIN LATERAL generate_series(
           date_bin(INTERVAL '1 hour', i.start_at + INTERVAL '1 hour' - INTERVAL '1 microsecond',
                    TIMESTAMPTZ '2000-01-01 00:00:00+00'),
           i.end_at - INTERVAL '1 microsecond', INTERVAL '1 hour') g
      JOIN (SELECT DISTINCT h FROM unnest(p_hours) h) x ON x.h = g   -- (hashed: = ANY is quadratic)
$$;
GRANT EXECUTE ON FUNCTION _measure.shifts_of_hours(smallint, timestamptz[]) TO measure_writer;

-- The first hour with hour-tier (or terminal) rows of a system and the end of its last one.
CREATE OR REPLACE FUNCTION _measure.hour_span(p_system smallint)
RETURNS TABLE (lo timestamptz, hi timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT min(x.lo), max(x.hi) + INTERVAL '1 hour'
      FROM (SELECT min(hour_at) AS lo, max(hour_at) AS hi FROM _measure.cpu_hour WHERE system_id = p_system
            UNION ALL SELECT min(hour_at), max(hour_at) FROM _measure.disc_hour WHERE system_id = p_system
            UNION ALL SELECT min(hour_at), max(hour_at) FROM _measure.line_hour WHERE system_id = p_system
            UNION ALL SELECT min(hour_at), max(hour_at) FROM _measure.process_hour WHERE system_id = p_system
            UNION ALL SELECT min(hour_at), max(hour_at) FROM _measure.userdef_hour WHERE system_id = p_system
            UNION ALL SELECT min(hour_at), max(hour_at) FROM _measure.tmf_hour WHERE system_id = p_system
            UNION ALL SELECT min(hour_at), max(hour_at) FROM _measure.terminal_hour WHERE system_id = p_system) x
$$;
GRANT EXECUTE ON FUNCTION _measure.hour_span(smallint) TO measure_writer;

-- Every UTC hour start in [p_from, p_to) that lies in a shift, with its shift, of one system
-- (all systems: NULL); only within the hours the system has data for (_measure.hour_span),
-- so any range may be given. What the readers join hour rows with to know their shift.
CREATE OR REPLACE FUNCTION _measure.shift_hours(p_system smallint, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (system_id smallint, hour_at timestamptz, shift_day date, shift_no smallint,
               start_at timestamptz, end_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT s.system_id, g, i.shift_day, i.shift_no, i.start_at, i.end_at
      FROM _measure.system s
     CROSS JOIN LATERAL _measure.hour_span(s.system_id) sp
     CROSS JOIN LATERAL (SELECT greatest(p_from, sp.lo) AS lo, least(p_to, sp.hi) AS hi) r
     CROSS JOIN LATERAL _measure.shifts_between(s.system_id, r.lo, r.hi) i
     CROSS JOIN LATERAL generate_series(
           date_bin(INTERVAL '1 hour', greatest(i.start_at, r.lo) + INTERVAL '1 hour' - INTERVAL '1 microsecond',
                    TIMESTAMPTZ '2000-01-01 00:00:00+00'),
           least(i.end_at, r.hi) - INTERVAL '1 microsecond', INTERVAL '1 hour') g
     WHERE (p_system IS NULL OR s.system_id = p_system) AND sp.lo IS NOT NULL AND r.lo < r.hi
$$;
GRANT EXECUTE ON FUNCTION _measure.shift_hours(smallint, timestamptz, timestamptz) TO measure_writer;

-- The shift (day it began, number) that an hour starting at hour_at belongs to (none: no row).
CREATE OR REPLACE FUNCTION _measure.shift_of(p_system smallint, p_hour timestamptz)
RETURNS TABLE (shift_day date, shift_no smallint)
LANGUAGE sql STABLE AS $$
    SELECT i.shift_day, i.shift_no
      FROM _measure.system s
     CROSS JOIN LATERAL _measure.calendar_instances(s.system_id, (p_hour AT TIME ZONE s.time_zone)::date - 1,
                                                    (p_hour AT TIME ZONE s.time_zone)::date) i
     WHERE s.system_id = p_system AND i.start_at <= p_hour AND p_hour < i.end_at
$$;
GRANT EXECUTE ON FUNCTION _measure.shift_of(smallint, timestamptz) TO measure_writer;

-- Where one shift of one day begins and ends.
CREATE OR REPLACE FUNCTION _measure.shift_bounds(p_system smallint, p_day date, p_shift smallint)
RETURNS TABLE (start_at timestamptz, end_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT i.start_at, i.end_at FROM _measure.calendar_instances(p_system, p_day, p_day) i
     WHERE i.shift_no = p_shift
$$;
GRANT EXECUTE ON FUNCTION _measure.shift_bounds(smallint, date, smallint) TO measure_writer;

-- The name of every shift number of each system: from the newest calendar version that has
-- it (its first weekday), else from the base shifts.
CREATE OR REPLACE VIEW _measure.shift_name AS
SELECT DISTINCT ON (x.system_id, x.shift_no) x.system_id, x.shift_no, x.name
  FROM (SELECT c.system_id, cs.shift_no, cs.name, c.effective_from AS since, cs.weekday AS ord
          FROM _measure.calendar c JOIN _measure.calendar_shift cs ON cs.calendar_id = c.calendar_id
        UNION ALL
        SELECT c.system_id, c.holiday_shift, c.holiday_name, c.effective_from, 0
          FROM _measure.calendar c WHERE c.holiday_shift IS NOT NULL
        UNION ALL
        SELECT ss.system_id, ss.shift_no, ss.name, date '-infinity', 0 FROM _measure.system_shift ss) x
 ORDER BY x.system_id, x.shift_no, x.since DESC, x.ord;
GRANT SELECT ON _measure.shift_name TO measure_writer;

-- MEASURE's hourly LOADID (Figure 2: DT00111 = day 001, hour 11, local time).
CREATE OR REPLACE FUNCTION measure.loadid(local_hour timestamp)
RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT 'DT' || to_char(local_hour, 'DDD') || to_char(local_hour, 'HH24')
$$;
GRANT EXECUTE ON FUNCTION measure.loadid(timestamp) TO measure_writer, measure_api, measure_reader;

-- ---------------------------------------------------------------- the hour tiers' columns

-- One definition of the hour tiers, for both engines. Each row is one counter column of
-- _measure.<entity>_hour, in column order: the counter's position in counters[]
-- (schema/catalog/counters.csv; tests/schema/test_tiers.py checks it), its name, the column
-- of its sum (sum of the counter deltas, negatives clamped to 0), and for a rate (RATE ON:
-- 'percent' = 100 x value / DELTA-TIME, 'queue' = value / DELTA-TIME, 'per_second' =
-- 10^6 x value / DELTA-TIME) the columns of the smallest and largest interval value.
-- _measure.hour_tier_sql(entity) writes the SELECT of _measure.<entity>_hour_rows(p_system,
-- p_hours) from it (schema/idempotent/021-condense.sql generates those functions); the
-- TimescaleDB branch uses the same tables and functions (schema/100-interval-runs.timescale.sql
-- says why its continuous aggregates were retired).
CREATE OR REPLACE VIEW _measure.hour_tier_column (entity, type_code, ord, sum_col, position, counter,
                                                  rate, min_col, max_col) AS VALUES
    ('cpu', 1, 1, 'busy_us', 1, 'cpu_busy_time', 'percent', 'busy_min', 'busy_max'),
    ('cpu', 1, 2, 'qlen_us', 2, 'cpu_qtime', 'queue', 'qlen_min', 'qlen_max'),
    ('cpu', 1, 3, 'mqlen_us', 4, 'mem_qtime', 'queue', 'mqlen_min', 'mqlen_max'),
    ('cpu', 1, 4, 'swaps', 7, 'swaps', 'per_second', 'swap_min', 'swap_max'),
    ('cpu', 1, 5, 'ibusy_us', 8, 'intr_busy_time', 'percent', 'ibusy_min', 'ibusy_max'),
    ('cpu', 1, 6, 'sbusy_us', 10, 'send_busy_time', 'percent', 'sbusy_min', 'sbusy_max'),
    ('cpu', 1, 7, 'dispatches', 6, 'dispatches', NULL, NULL, NULL),
    ('cpu', 1, 8, 'process_ovhd_us', 9, 'process_ovhd', NULL, NULL, NULL),
    ('cpu', 1, 9, 'disc_ios', 11, 'disc_ios', NULL, NULL, NULL),
    ('cpu', 1, 10, 'cache_hits', 12, 'cache_hits', NULL, NULL, NULL),
    ('cpu', 1, 11, 'transactions', 13, 'transactions', NULL, NULL, NULL),
    ('cpu', 1, 12, 'response_us', 14, 'response_time', NULL, NULL, NULL),
    ('disc', 7, 1, 'busy_us', 12, 'device_qbusy_time', 'percent', 'busy_min', 'busy_max'),
    ('disc', 7, 2, 'qlen_us', 2, 'request_qtime', 'queue', 'qlen_min', 'qlen_max'),
    ('disc', 7, 3, 'seek_busy_us', 15, 'seek_busy_time', 'percent', 'seek_busy_min', 'seek_busy_max'),
    ('disc', 7, 4, 'write_busy_us', 14, 'write_busy_time', 'percent', 'write_busy_min', 'write_busy_max'),
    ('disc', 7, 5, 'requests', 1, 'requests', NULL, NULL, NULL),
    ('disc', 7, 6, 'reads', 4, 'reads', NULL, NULL, NULL),
    ('disc', 7, 7, 'writes', 5, 'writes', NULL, NULL, NULL),
    ('disc', 7, 8, 'input_bytes', 6, 'input_bytes', NULL, NULL, NULL),
    ('disc', 7, 9, 'output_bytes', 7, 'output_bytes', NULL, NULL, NULL),
    ('disc', 7, 10, 'cache_hits', 17, 'cache_hits', NULL, NULL, NULL),
    ('disc', 7, 11, 'cache_misses', 18, 'cache_misses', NULL, NULL, NULL),
    ('disc', 7, 12, 'block_splits', 20, 'block_splits', NULL, NULL, NULL),
    ('line', 9, 1, 'read_busy_us', 1, 'read_busy_time', 'percent', 'read_busy_min', 'read_busy_max'),
    ('line', 9, 2, 'write_busy_us', 2, 'write_busy_time', 'percent', 'write_busy_min', 'write_busy_max'),
    ('line', 9, 3, 'requests', 3, 'requests', NULL, NULL, NULL),
    ('line', 9, 4, 'reads', 4, 'reads', NULL, NULL, NULL),
    ('line', 9, 5, 'writes', 5, 'writes', NULL, NULL, NULL),
    ('line', 9, 6, 'input_bytes', 7, 'input_bytes', NULL, NULL, NULL),
    ('line', 9, 7, 'output_bytes', 8, 'output_bytes', NULL, NULL, NULL),
    ('line', 9, 8, 'transactions', 11, 'transactions', NULL, NULL, NULL),
    ('line', 9, 9, 'response_us', 12, 'response_time', NULL, NULL, NULL),
    ('process', 2, 1, 'busy_us', 1, 'cpu_busy_time', 'percent', 'busy_min', 'busy_max'),
    ('process', 2, 2, 'ready_us', 2, 'ready_time', NULL, NULL, NULL),
    ('process', 2, 3, 'pqlen_us', 15, 'recv_qtime', 'queue', 'pqlen_min', 'pqlen_max'),
    ('process', 2, 4, 'vsems', 17, 'vsems', 'per_second', 'vsem_min', 'vsem_max'),
    ('process', 2, 5, 'dispatches', 3, 'dispatches', NULL, NULL, NULL),
    ('process', 2, 6, 'page_faults', 5, 'page_faults', NULL, NULL, NULL),
    ('process', 2, 7, 'messages_sent', 6, 'messages_sent', NULL, NULL, NULL),
    ('process', 2, 8, 'messages_received', 7, 'messages_received', NULL, NULL, NULL),
    ('userdef', 4, 1, 'value_sum', 1, 'time_value', 'per_second', 'value_min', 'value_max'),
    ('tmf', 14, 1, 'home_trans', 1, 'home_trans', 'per_second', 'trans_min', 'trans_max'),
    ('tmf', 14, 2, 'home_trans_us', 2, 'home_trans_qtime', NULL, NULL, NULL),
    ('tmf', 14, 3, 'remote_trans', 7, 'remote_trans', NULL, NULL, NULL),
    ('tmf', 14, 4, 'aborting_trans', 10, 'aborting_trans', NULL, NULL, NULL);
GRANT SELECT ON _measure.hour_tier_column TO measure_writer;

-- The RATE ON value of one interval from a (non-negative) counter expression.
CREATE OR REPLACE FUNCTION _measure.hour_tier_rate(p_rate text, p_value text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT CASE p_rate WHEN 'percent' THEN '100.0 * ' || p_value || ' / delta_us'
                       WHEN 'queue' THEN p_value || '::numeric / delta_us'
                       WHEN 'per_second' THEN '1000000.0 * ' || p_value || ' / delta_us' END
$$;
GRANT EXECUTE ON FUNCTION _measure.hour_tier_rate(text, text) TO measure_writer;

-- The smallest (or largest) RATE ON value of one counter over the intervals of one entity,
-- measurement and UTC hour, interval by interval (what the hour tiers compute for deltas of
-- 10^12 and more; see below).
CREATE OR REPLACE FUNCTION _measure.hour_extreme(p_system smallint, p_type smallint, p_entity bigint,
                                                 p_measurement integer, p_hour timestamptz, p_position integer,
                                                 p_rate text, p_max boolean)
RETURNS numeric LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    v_out numeric;
BEGIN
    EXECUTE format('SELECT %s(%s) FROM _measure.intervals($1, $2, $3, $3 + INTERVAL ''1 hour'') ir'
                   ' WHERE ir.entity_id = $4 AND ir.measurement_id = $5',
                   CASE WHEN p_max THEN 'max' ELSE 'min' END,
                   replace(_measure.hour_tier_rate(p_rate, format('greatest(ir.c[ir.i][%s], 0)', p_position)),
                           'delta_us', 'ir.delta_us'))
    INTO v_out USING p_system, p_type, p_hour, p_entity, p_measurement;
    RETURN v_out;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.hour_extreme(smallint, smallint, bigint, integer, timestamptz, integer, text, boolean)
    TO measure_writer;

-- The SELECT of an entity's hour tier, from the interval records of the given hours p_hours
-- (_measure.intervals: runs unpacked; v_lo and v_hi are the first hour and the end of the
-- last, computed beforehand so that the function is inlined), with integer work per interval: the intervals are
-- grouped by entity, measurement, hour AND DELTA-TIME keeping each counter's smallest and
-- largest delta, and only the values of those extremes are computed. For one DELTA-TIME the
-- largest delta has the largest value, and its value is exactly the one computed interval by
-- interval: numeric division rounds to at least 16 significant digits, monotonically in the
-- dividend while it is below 10^12 (the gap between the values of two deltas, 1/x of the
-- value, is then wider than the rounding, at most 10^-12 of it). An hour with a delta of
-- 10^12 or more (a queue of 300 over an hour-long interval) computes that item interval by
-- interval.
CREATE OR REPLACE FUNCTION _measure.hour_tier_sql(p_entity text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_code smallint := (SELECT min(type_code) FROM _measure.hour_tier_column WHERE entity = p_entity);
    v_big constant text := '1000000000000';  -- 10^12, see above
    v_col text := '';
    v_inner text := '';
    v_outer text := '';
    v_exact text;
    r record;
    x text;
BEGIN
    IF v_code IS NULL THEN
        RAISE EXCEPTION 'hour_tier_sql: unknown entity %', p_entity;
    END IF;
    FOR r IN SELECT * FROM _measure.hour_tier_column WHERE entity = p_entity ORDER BY ord LOOP
        x := format('greatest(ir.c[ir.i][%s] /* %s.%s */, 0)', r.position, p_entity, r.counter);
        v_col := v_col || format(E',\n                       %s AS c%s', x, r.ord);
        v_inner := v_inner || format(E',\n               sum(c%s) AS s%1$s', r.ord);
        v_outer := v_outer || format(E',\n       sum(s%s) AS %s', r.ord, r.sum_col);
        CONTINUE WHEN r.rate IS NULL;
        v_inner := v_inner || format(E',\n               min(c%1$s) AS lo%1$s, max(c%1$s) AS hi%1$s', r.ord);
        -- the interval-by-interval value of the group's hour (deltas of 10^12 and more only;
        -- a function, so that the hour's query plans no subquery over every partition)
        v_exact := format('_measure.hour_extreme(d.system_id, %s::smallint, d.entity_id, d.measurement_id,'
                          ' d.hour_at, %s, %L, %%s)', v_code, r.position, r.rate);
        v_outer := v_outer
            || format(E',\n       CASE WHEN max(hi%s) < %s THEN min(%s)\n            ELSE %s END AS %s',
                      r.ord, v_big, _measure.hour_tier_rate(r.rate, 'lo' || r.ord), format(v_exact, 'false'), r.min_col)
            || format(E',\n       CASE WHEN max(hi%s) < %s THEN max(%s)\n            ELSE %s END AS %s',
                      r.ord, v_big, _measure.hour_tier_rate(r.rate, 'hi' || r.ord), format(v_exact, 'true'), r.max_col);
    END LOOP;
    RETURN format(E'SELECT system_id, entity_id, measurement_id, hour_at,\n'
                  || E'       min(cpu) AS cpu, sum(n)::bigint AS samples, sum(delta_us * n) AS elapsed_us,\n'
                  || E'       min(first_from_at) AS first_from_at, max(last_to_at) AS last_to_at%s\n'
                  || E'  FROM (SELECT system_id, entity_id, measurement_id, hour_at, delta_us, min(cpu) AS cpu,\n'
                  || E'               count(*) AS n, min(from_at) AS first_from_at, max(to_at) AS last_to_at%s\n'
                  || E'          FROM (SELECT ir.system_id, ir.entity_id, ir.measurement_id, ir.hour_at,\n'
                  || E'                       ir.delta_us, ir.cpu, ir.from_at, ir.to_at%s\n'
                  || E'                  FROM _measure.intervals(p_system, %s::smallint, v_lo, v_hi) ir\n'
                  || E'                 WHERE ir.hour_at = ANY (p_hours)) r\n'
                  || E'         GROUP BY system_id, entity_id, measurement_id, hour_at, delta_us) d\n'
                  || E' GROUP BY system_id, entity_id, measurement_id, hour_at', v_outer, v_inner, v_col, v_code);
END
$$;
DROP FUNCTION IF EXISTS _measure.hour_tier_sql(text, text);
GRANT EXECUTE ON FUNCTION _measure.hour_tier_sql(text) TO measure_writer;

-- ---------------------------------------------------------------- one measurement per hour

-- Per entity and hour, the row of the measurement with the most measured time (ties: the
-- lower measurement_id). Every reading of the hour tiers goes through these views. Which
-- row wins is decided when the hour is condensed (_measure.hour_shadow holds the losers,
-- schema/050-read-paths.sql), so a view is the hour tier minus those rows: an anti-join
-- that the planner flattens into the reader, keeping its time range an index range scan.
DO $best$
DECLARE
    v_entity text;
BEGIN
    FOREACH v_entity IN ARRAY _measure.tiered_entities() LOOP
        EXECUTE format($v$
            CREATE OR REPLACE VIEW _measure.%1$I AS
            SELECT h.* FROM _measure.%2$I h
             WHERE NOT EXISTS (SELECT 1 FROM _measure.hour_shadow x
                                WHERE x.system_id = h.system_id AND x.entity_id = h.entity_id
                                  AND x.measurement_id = h.measurement_id AND x.hour_at = h.hour_at)$v$,
            v_entity || '_hour_best', v_entity || '_hour');
        EXECUTE format('GRANT SELECT ON _measure.%I TO measure_writer', v_entity || '_hour_best');
    END LOOP;
END
$best$;

-- A user counter's TYPE (ACCUM, FACCUM, BUSY, QUEUE, QBUSY) from its measurement's CONTAB.
-- SECURITY DEFINER: the public userdef views call it for readers who cannot read
-- _measure.measurement themselves (and it must not be inlined into their query).
CREATE OR REPLACE FUNCTION _measure.user_counter_type(p_measurement integer, p_name text)
RETURNS text LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT c->>'type'
      FROM _measure.measurement m, jsonb_array_elements(coalesce(m.contab->'counters', '[]')) c
     WHERE m.measurement_id = p_measurement AND upper(c->>'name') = upper(p_name)
     LIMIT 1
$$;
REVOKE ALL ON FUNCTION _measure.user_counter_type(integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _measure.user_counter_type(integer, text)
    TO measure_writer, measure_api, measure_reader;

-- ---------------------------------------------------------------- public hour views

CREATE OR REPLACE VIEW measure.cpu_hour AS
SELECT s.system_name, h.cpu, h.hour_at,
       (h.hour_at AT TIME ZONE s.time_zone) AS local_hour,
       measure.loadid(h.hour_at AT TIME ZONE s.time_zone) AS loadid,
       h.measurement_id, h.samples, h.elapsed_us / 1e6 AS elapsed_seconds,
       h.elapsed_us / 3.6e9 AS coverage_ratio,
       measure.avg_queue_length(h.qlen_us, h.elapsed_us) AS qlen_avg,
       h.qlen_max, h.qlen_min, h.qlen_max - h.qlen_min AS qlen_delt,
       measure.avg_queue_length(h.mqlen_us, h.elapsed_us) AS mqlen_avg, h.mqlen_max,
       measure.per_second(h.swaps, h.elapsed_us) AS swap_avg, h.swap_max,
       measure.busy_percent(h.busy_us, h.elapsed_us) AS busy_avg,
       h.busy_max, h.busy_min, h.busy_max - h.busy_min AS busy_delt,
       measure.busy_percent(h.ibusy_us, h.elapsed_us) AS ibusy_avg, h.ibusy_max,
       measure.busy_percent(h.sbusy_us, h.elapsed_us) AS sbusy_avg, h.sbusy_max,
       measure.per_second(h.dispatches, h.elapsed_us) AS dispatches_per_second,
       measure.per_second(h.disc_ios, h.elapsed_us) AS disc_ios_per_second,
       h.transactions, h.response_us / nullif(h.transactions, 0) / 1e6 AS response_seconds_avg,
       s.os_version,
       coalesce(e.ids->>'cpu_type',            -- the system's CPU types (measuredb system set --cpu-types)
                (SELECT ct.cpu_type FROM _measure.system_cpu_type ct
                  WHERE ct.system_id = h.system_id AND (ct.cpu = h.cpu OR ct.cpu IS NULL)
                  ORDER BY ct.cpu NULLS LAST LIMIT 1)) AS cpu_type,
       h.system_id, h.entity_id,
       -- appended (a view keeps its column order): every stored statistic, minima included
       h.mqlen_min, h.swap_min, h.ibusy_min, h.sbusy_min, h.first_from_at, h.last_to_at
  FROM _measure.cpu_hour_best h
  JOIN _measure.system s USING (system_id)
  JOIN _measure.entity e USING (entity_id);
GRANT SELECT ON measure.cpu_hour TO measure_writer, measure_api, measure_reader;
COMMENT ON VIEW measure.cpu_hour IS
    'CPU hourly tier (ENFORM Figure 5, CPUT): one row per system, CPU and hour (UTC hour_at, local_hour in the system time zone).';
COMMENT ON COLUMN measure.cpu_hour.qlen_avg IS 'QLEN = CPU-QTIME / DELTA-TIME, time-weighted over the hour';
COMMENT ON COLUMN measure.cpu_hour.qlen_max IS 'MAX CPU QLEN: largest interval QLEN in the hour (Figure 1; QLEN-MAX)';
COMMENT ON COLUMN measure.cpu_hour.qlen_delt IS 'DELT CPU QLEN = QLEN-MAX - QLEN-MIN of the interval values (Figure 9 QLEN-DELT)';
COMMENT ON COLUMN measure.cpu_hour.mqlen_avg IS 'MQLEN = MEM-QTIME / DELTA-TIME';
COMMENT ON COLUMN measure.cpu_hour.swap_avg IS 'SWAP = SWAPS per second';
COMMENT ON COLUMN measure.cpu_hour.busy_avg IS 'BUSY = CPU-BUSY-TIME %, time-weighted';
COMMENT ON COLUMN measure.cpu_hour.busy_max IS 'MAX CPU BUSY (BUSY-MAX)';
COMMENT ON COLUMN measure.cpu_hour.busy_delt IS 'DELT CPU BUSY = BUSY-MAX - BUSY-MIN (Figure 9 BUSY-DELT)';
COMMENT ON COLUMN measure.cpu_hour.ibusy_avg IS 'IBUSY = INTR-BUSY-TIME %';
COMMENT ON COLUMN measure.cpu_hour.sbusy_avg IS 'SBUSY = SEND-BUSY-TIME %';
COMMENT ON COLUMN measure.cpu_hour.coverage_ratio IS 'measured time / one hour (0-1): a half-measured hour is visible';

-- DISC, paths folded per volume: sums are added over the paths, elapsed time is that of
-- the longest-measured path, and the interval extremes are the sums of the paths'
-- extremes (exact when one path carries the traffic, as the primary path does; an upper
-- bound otherwise, which is the safe side for thresholds).
CREATE OR REPLACE VIEW measure.disc_hour AS
SELECT s.system_name, e.ids->>'device_name' AS volume, h.hour_at,
       (h.hour_at AT TIME ZONE s.time_zone) AS local_hour,
       measure.loadid(h.hour_at AT TIME ZONE s.time_zone) AS loadid,
       count(*) AS paths, sum(h.samples) AS samples, max(h.elapsed_us) / 1e6 AS elapsed_seconds,
       max(h.elapsed_us) / 3.6e9 AS coverage_ratio,
       measure.busy_percent(sum(h.busy_us), max(h.elapsed_us)) AS busy_avg,
       sum(h.busy_max) AS busy_max, sum(h.busy_min) AS busy_min,
       sum(h.busy_max) - sum(h.busy_min) AS busy_delt,
       measure.avg_queue_length(sum(h.qlen_us), max(h.elapsed_us)) AS qlen_avg,
       sum(h.qlen_max) AS qlen_max, sum(h.qlen_min) AS qlen_min,
       sum(h.qlen_max) - sum(h.qlen_min) AS qlen_delt,
       measure.busy_percent(sum(h.seek_busy_us), max(h.elapsed_us)) AS seek_busy_avg,
       measure.busy_percent(sum(h.write_busy_us), max(h.elapsed_us)) AS write_busy_avg,
       sum(h.write_busy_max) AS write_busy_max,
       measure.per_second(sum(h.requests), max(h.elapsed_us)) AS requests_per_second,
       measure.per_second(sum(h.cache_hits), max(h.elapsed_us)) AS cache_hits_per_second,
       measure.per_second(sum(h.cache_misses), max(h.elapsed_us)) AS cache_misses_per_second,
       sum(h.cache_hits) / nullif(sum(h.cache_hits) + sum(h.cache_misses), 0) AS cache_hit_ratio,
       measure.per_second(sum(h.input_bytes) + sum(h.output_bytes), max(h.elapsed_us))
           AS bytes_per_second,
       sum(h.block_splits) AS block_splits, h.system_id,
       -- appended (a view keeps its column order): every stored statistic, minima included
       sum(h.seek_busy_max) AS seek_busy_max, sum(h.seek_busy_min) AS seek_busy_min,
       sum(h.write_busy_min) AS write_busy_min, min(h.first_from_at) AS first_from_at,
       max(h.last_to_at) AS last_to_at
  FROM _measure.disc_hour_best h
  JOIN _measure.system s USING (system_id)
  JOIN _measure.entity e USING (entity_id)
 GROUP BY s.system_name, s.time_zone, e.ids->>'device_name', h.hour_at, h.system_id;
GRANT SELECT ON measure.disc_hour TO measure_writer, measure_api, measure_reader;
COMMENT ON VIEW measure.disc_hour IS
    'DISC hourly tier per volume, paths folded: DISC BUSY (DEVICE-QBUSY-TIME %), REQ QLEN, SEEK BUSY, CACHE HITS/MISSES, WRITE BUSY, BYTE RATE.';
COMMENT ON COLUMN measure.disc_hour.qlen_avg IS 'REQ QLEN = REQUEST-QTIME / DELTA-TIME';
COMMENT ON COLUMN measure.disc_hour.busy_avg IS 'DISC BUSY = DEVICE-QBUSY-TIME %';

CREATE OR REPLACE VIEW measure.line_hour AS
SELECT s.system_name, e.ids->>'device_name' AS line, h.cpu, h.hour_at,
       (h.hour_at AT TIME ZONE s.time_zone) AS local_hour,
       measure.loadid(h.hour_at AT TIME ZONE s.time_zone) AS loadid,
       h.measurement_id, h.samples, h.elapsed_us / 1e6 AS elapsed_seconds,
       h.elapsed_us / 3.6e9 AS coverage_ratio,
       measure.busy_percent(h.read_busy_us, h.elapsed_us) AS read_busy_avg, h.read_busy_max,
       measure.busy_percent(h.write_busy_us, h.elapsed_us) AS write_busy_avg, h.write_busy_max,
       measure.per_second(h.requests, h.elapsed_us) AS requests_per_second,
       measure.per_second(h.input_bytes + h.output_bytes, h.elapsed_us) AS bytes_per_second,
       measure.per_second(h.transactions, h.elapsed_us) AS transactions_per_second,
       h.response_us / nullif(h.transactions, 0) / 1e6 AS response_seconds_avg,
       h.system_id, h.entity_id,
       -- appended (a view keeps its column order): every stored statistic, minima included
       h.read_busy_min, h.write_busy_min, h.first_from_at, h.last_to_at
  FROM _measure.line_hour_best h
  JOIN _measure.system s USING (system_id)
  JOIN _measure.entity e USING (entity_id);
GRANT SELECT ON measure.line_hour TO measure_writer, measure_api, measure_reader;
COMMENT ON VIEW measure.line_hour IS
    'LINE hourly tier: read/write busy %, requests/s, bytes/s, transactions/s, average response.';

CREATE OR REPLACE VIEW measure.process_hour AS
SELECT s.system_name, h.cpu, e.pin, e.process_name, e.program_file_name, e.priority,
       h.hour_at, (h.hour_at AT TIME ZONE s.time_zone) AS local_hour,
       measure.loadid(h.hour_at AT TIME ZONE s.time_zone) AS loadid,
       h.measurement_id, h.samples, h.elapsed_us / 1e6 AS elapsed_seconds,
       h.elapsed_us / 3.6e9 AS coverage_ratio,
       measure.busy_percent(h.busy_us, h.elapsed_us) AS busy_avg, h.busy_max, h.busy_min,
       measure.avg_queue_length(h.pqlen_us, h.elapsed_us) AS pqlen_avg, h.pqlen_max, h.pqlen_min,
       measure.per_second(h.vsems, h.elapsed_us) AS vsem_avg, h.vsem_max,
       h.ready_us / nullif(h.busy_us, 0) AS ready_busy_ratio,
       h.busy_us / 1e6 AS cpu_seconds, h.messages_sent, h.messages_received,
       h.dispatches, h.page_faults, h.system_id, h.entity_id,
       -- appended (a view keeps its column order): every stored statistic, minima included
       h.vsem_min, h.first_from_at, h.last_to_at
  FROM _measure.process_hour_best h
  JOIN _measure.system s USING (system_id)
  -- the names once per process, not once per hour row (OFFSET 0: before the join; a week of
  -- ref16's 394 processes is 66,000 hour rows, and reading the names out of each row's
  -- entity cost as much as the rest of the view)
  JOIN (SELECT e.entity_id, (e.ids->>'pin')::integer AS pin, e.ids->>'process_name' AS process_name,
               e.ids->>'program_file_name' AS program_file_name, (e.ids->>'priority')::integer AS priority
          FROM _measure.entity e
         WHERE e.type_code = (SELECT t.type_code FROM _measure.entity_type t WHERE t.entity = 'process')
        OFFSET 0) e USING (entity_id);
GRANT SELECT ON measure.process_hour TO measure_writer, measure_api, measure_reader;
COMMENT ON VIEW measure.process_hour IS
    'PROCESS hourly tier (Figure 7): PQLEN = RECV-QTIME/DELTA-TIME, VSEM = VSEMS/s, READY-BUSY = READY-TIME/CPU-BUSY-TIME. Unfiltered: apply Figure 7''s PQLEN > 0.3 in reports.';
COMMENT ON COLUMN measure.process_hour.pqlen_avg IS 'PQLEN (Figure 7 PQLEN-AVG)';
COMMENT ON COLUMN measure.process_hour.ready_busy_ratio IS 'READY-BUSY = READY-TIME / CPU-BUSY-TIME';

-- USERDEF: the value in the unit of the counter's TYPE: ACCUM/FACCUM per second, BUSY and
-- QBUSY %, QUEUE average queue length (measure.rate decides, style P3).
CREATE OR REPLACE VIEW measure.userdef_hour AS
SELECT s.system_name, h.cpu, e.pin, e.process_name, e.program_file_name, e.counter_name, e.counter_index,
       t.counter_type,
       h.hour_at, (h.hour_at AT TIME ZONE s.time_zone) AS local_hour,
       measure.loadid(h.hour_at AT TIME ZONE s.time_zone) AS loadid,
       h.measurement_id, h.samples, h.elapsed_us / 1e6 AS elapsed_seconds,
       h.elapsed_us / 3.6e9 AS coverage_ratio,
       measure.rate(t.kind, h.value_sum, h.elapsed_us) AS value_avg,
       h.value_max * t.factor AS value_max, h.value_min * t.factor AS value_min,
       h.value_sum, h.system_id, h.entity_id,
       -- appended (a view keeps its column order): every stored statistic, minima included
       h.first_from_at, h.last_to_at
  FROM _measure.userdef_hour_best h
  JOIN _measure.system s USING (system_id)
  -- the names once per user counter, not once per hour row (as measure.process_hour)
  JOIN (SELECT e.entity_id, (e.ids->>'pin')::integer AS pin, e.ids->>'process_name' AS process_name,
               e.ids->>'program_file_name' AS program_file_name, upper(e.ids->>'name') AS counter_name,
               (e.ids->>'index')::integer AS counter_index
          FROM _measure.entity e
         WHERE e.type_code = (SELECT t.type_code FROM _measure.entity_type t WHERE t.entity = 'userdef')
        OFFSET 0) e USING (entity_id)
  -- the counter's TYPE as its measurement's CONTAB declares it (the first ADD COUNTER of the
  -- name; ACCUM when none does): joined once per query, not looked up per row (a SECURITY
  -- DEFINER function per row cost 7 s on a week of the reference node's 320 user counters)
  LEFT JOIN (SELECT DISTINCT ON (m.measurement_id, upper(c.value->>'name'))
                    m.measurement_id, upper(c.value->>'name') AS counter_name, c.value->>'type' AS ut
               FROM _measure.measurement m,
                    jsonb_array_elements(coalesce(m.contab->'counters', '[]')) WITH ORDINALITY c (value, n)
              ORDER BY m.measurement_id, upper(c.value->>'name'), c.n) uc
         ON uc.measurement_id = h.measurement_id AND uc.counter_name = e.counter_name
  CROSS JOIN LATERAL (
      SELECT ut AS counter_type,
             CASE WHEN ut IN ('BUSY', 'QBUSY') THEN 'busy' WHEN ut = 'QUEUE' THEN 'queue'
                  ELSE 'accumulating' END AS kind,
             -- value_min/max are stored per second; convert to the TYPE's unit
             CASE WHEN ut IN ('BUSY', 'QBUSY') THEN 1e-4 WHEN ut = 'QUEUE' THEN 1e-6
                  ELSE 1 END AS factor
        FROM (SELECT coalesce(uc.ut, 'ACCUM') AS ut) x) t;
GRANT SELECT ON measure.userdef_hour TO measure_writer, measure_api, measure_reader;
COMMENT ON VIEW measure.userdef_hour IS
    'USERDEF hourly tier per process and counter element: ACCUM per second, BUSY %, QUEUE average queue length.';

CREATE OR REPLACE VIEW measure.tmf_hour AS
SELECT s.system_name, h.cpu, h.hour_at, (h.hour_at AT TIME ZONE s.time_zone) AS local_hour,
       measure.loadid(h.hour_at AT TIME ZONE s.time_zone) AS loadid,
       h.measurement_id, h.samples, h.elapsed_us / 1e6 AS elapsed_seconds,
       h.elapsed_us / 3.6e9 AS coverage_ratio,
       measure.per_second(h.home_trans, h.elapsed_us) AS trans_avg, h.trans_max,
       h.home_trans_us / nullif(h.home_trans, 0) / 1e6 AS lifetime_seconds_avg,
       h.home_trans, h.remote_trans, h.aborting_trans, h.system_id, h.entity_id,
       -- appended (a view keeps its column order): every stored statistic, minima included
       h.trans_min, h.first_from_at, h.last_to_at
  FROM _measure.tmf_hour_best h
  JOIN _measure.system s USING (system_id)
  JOIN _measure.entity e USING (entity_id);
GRANT SELECT ON measure.tmf_hour TO measure_writer, measure_api, measure_reader;
COMMENT ON VIEW measure.tmf_hour IS
    'TMF hourly tier per CPU: transactions begun per second, mean transaction lifetime (HOME-TRANS-QTIME / HOME-TRANS).';

-- ---------------------------------------------------------------- items for the upper tiers

-- The ENFORM items the shift, month and year tiers keep, one row each, in the order of the
-- tier views' columns: the catalogue's (schema/catalog/tier_items.csv). An item's value is the
-- hour's (time-weighted) value and its weight what it is weighted by when hours are combined
-- (elapsed time, or the denominator of a ratio), both computed by _measure.hour_item below.
CREATE OR REPLACE VIEW measure.tier_item (entity, item, enform, unit, help) AS
SELECT i.entity, i.item, i.enform, i.unit, i.help
  FROM _measure.tier_item i JOIN _measure.tier_entity t USING (entity)
 ORDER BY t.tier_order, i.position;
GRANT SELECT ON measure.tier_item TO measure_writer, measure_api, measure_reader;

-- Every item of every subject and hour (one measurement per entity and hour).
CREATE OR REPLACE VIEW _measure.hour_item AS
SELECT h.system_id, 'cpu'::text AS entity, h.cpu::text AS subject, h.hour_at, h.samples,
       h.elapsed_us, i.item, i.value, i.weight
  FROM _measure.cpu_hour_best h
 CROSS JOIN LATERAL (VALUES
       ('qlen', measure.avg_queue_length(h.qlen_us, h.elapsed_us), h.elapsed_us),
       ('mqlen', measure.avg_queue_length(h.mqlen_us, h.elapsed_us), h.elapsed_us),
       ('swap', measure.per_second(h.swaps, h.elapsed_us), h.elapsed_us),
       ('busy', measure.busy_percent(h.busy_us, h.elapsed_us), h.elapsed_us),
       ('ibusy', measure.busy_percent(h.ibusy_us, h.elapsed_us), h.elapsed_us),
       ('sbusy', measure.busy_percent(h.sbusy_us, h.elapsed_us), h.elapsed_us)) i (item, value, weight)
UNION ALL
SELECT d.system_id, 'disc', d.volume, d.hour_at, d.samples, d.elapsed_us, i.item, i.value, i.weight
  FROM (SELECT h.system_id, e.ids->>'device_name' AS volume, h.hour_at, sum(h.samples) AS samples,
               max(h.elapsed_us) AS elapsed_us, sum(h.busy_us) AS busy_us, sum(h.qlen_us) AS qlen_us,
               sum(h.seek_busy_us) AS seek_busy_us, sum(h.write_busy_us) AS write_busy_us,
               sum(h.cache_hits) AS cache_hits, sum(h.cache_misses) AS cache_misses,
               sum(h.input_bytes) + sum(h.output_bytes) AS bytes
          FROM _measure.disc_hour_best h JOIN _measure.entity e USING (entity_id)
         GROUP BY h.system_id, e.ids->>'device_name', h.hour_at) d
 CROSS JOIN LATERAL (VALUES
       ('busy', measure.busy_percent(d.busy_us, d.elapsed_us), d.elapsed_us),
       ('qlen', measure.avg_queue_length(d.qlen_us, d.elapsed_us), d.elapsed_us),
       ('seek_busy', measure.busy_percent(d.seek_busy_us, d.elapsed_us), d.elapsed_us),
       ('write_busy', measure.busy_percent(d.write_busy_us, d.elapsed_us), d.elapsed_us),
       ('cache_hits', measure.per_second(d.cache_hits, d.elapsed_us), d.elapsed_us),
       ('cache_misses', measure.per_second(d.cache_misses, d.elapsed_us), d.elapsed_us),
       ('hit_ratio', d.cache_hits / nullif(d.cache_hits + d.cache_misses, 0),
        d.cache_hits + d.cache_misses),
       ('byte_rate', measure.per_second(d.bytes, d.elapsed_us), d.elapsed_us)) i (item, value, weight)
UNION ALL
SELECT h.system_id, 'line', h.entity_id::text, h.hour_at, h.samples, h.elapsed_us, i.item, i.value, i.weight
  FROM _measure.line_hour_best h
 CROSS JOIN LATERAL (VALUES
       ('read_busy', measure.busy_percent(h.read_busy_us, h.elapsed_us), h.elapsed_us),
       ('write_busy', measure.busy_percent(h.write_busy_us, h.elapsed_us), h.elapsed_us),
       ('requests', measure.per_second(h.requests, h.elapsed_us), h.elapsed_us),
       ('byte_rate', measure.per_second(h.input_bytes + h.output_bytes, h.elapsed_us), h.elapsed_us),
       ('tps', measure.per_second(h.transactions, h.elapsed_us), h.elapsed_us),
       ('response', h.response_us / nullif(h.transactions, 0) / 1e6, h.transactions)) i (item, value, weight)
UNION ALL
SELECT h.system_id, 'process', h.entity_id::text, h.hour_at, h.samples, h.elapsed_us, i.item, i.value, i.weight
  FROM _measure.process_hour_best h
 CROSS JOIN LATERAL (VALUES
       ('busy', measure.busy_percent(h.busy_us, h.elapsed_us), h.elapsed_us),
       ('pqlen', measure.avg_queue_length(h.pqlen_us, h.elapsed_us), h.elapsed_us),
       ('vsem', measure.per_second(h.vsems, h.elapsed_us), h.elapsed_us),
       ('ready_busy', h.ready_us / nullif(h.busy_us, 0), h.busy_us)) i (item, value, weight)
UNION ALL
SELECT u.system_id, 'userdef', u.entity_id::text, u.hour_at, u.samples, u.elapsed_seconds * 1e6,
       'value', u.value_avg, u.elapsed_seconds * 1e6
  FROM measure.userdef_hour u
UNION ALL
SELECT h.system_id, 'tmf', h.cpu::text, h.hour_at, h.samples, h.elapsed_us, i.item, i.value, i.weight
  FROM _measure.tmf_hour_best h
 CROSS JOIN LATERAL (VALUES
       ('trans', measure.per_second(h.home_trans, h.elapsed_us), h.elapsed_us),
       ('lifetime', h.home_trans_us / nullif(h.home_trans, 0) / 1e6, h.home_trans)) i (item, value, weight);
GRANT SELECT ON _measure.hour_item TO measure_writer;

-- ---------------------------------------------------------------- condensing

CREATE OR REPLACE FUNCTION _measure.note_intervals(p_system smallint, p_from timestamptz,
                                                   p_to timestamptz)
RETURNS integer LANGUAGE sql AS $$
    WITH marked AS (
        INSERT INTO _measure.tier_dirty AS d (system_id, hour_at)
        SELECT p_system, h
          FROM generate_series(date_bin(INTERVAL '1 hour', p_from, TIMESTAMPTZ '2000-01-01 00:00:00+00'),
                               p_to, INTERVAL '1 hour') h
        ON CONFLICT (system_id, hour_at) DO UPDATE SET noted_at = now()
        RETURNING 1)
    SELECT count(*)::integer FROM marked
$$;
GRANT EXECUTE ON FUNCTION _measure.note_intervals(smallint, timestamptz, timestamptz) TO measure_writer;

-- Decide, for the given hours, which measurement's row of an entity-hour counts (see
-- _measure.<entity>_hour_best): the others are recorded in _measure.hour_shadow.
CREATE OR REPLACE FUNCTION _measure.condense_shadow(p_system smallint, p_hours timestamptz[])
RETURNS void LANGUAGE sql AS $$
    DELETE FROM _measure.hour_shadow WHERE system_id = p_system AND hour_at = ANY (p_hours);
    INSERT INTO _measure.hour_shadow (system_id, entity, entity_id, measurement_id, hour_at)
    SELECT p_system, x.entity, x.entity_id, x.measurement_id, x.hour_at
      FROM (SELECT x.*, row_number() OVER (PARTITION BY x.entity_id, x.hour_at
                                           ORDER BY x.elapsed_us DESC, x.measurement_id) AS rn
              FROM (SELECT 'cpu' AS entity, entity_id, measurement_id, hour_at, elapsed_us
                      FROM _measure.cpu_hour WHERE system_id = p_system AND hour_at = ANY (p_hours)
                    UNION ALL
                    SELECT 'disc', entity_id, measurement_id, hour_at, elapsed_us
                      FROM _measure.disc_hour WHERE system_id = p_system AND hour_at = ANY (p_hours)
                    UNION ALL
                    SELECT 'line', entity_id, measurement_id, hour_at, elapsed_us
                      FROM _measure.line_hour WHERE system_id = p_system AND hour_at = ANY (p_hours)
                    UNION ALL
                    SELECT 'process', entity_id, measurement_id, hour_at, elapsed_us
                      FROM _measure.process_hour WHERE system_id = p_system AND hour_at = ANY (p_hours)
                    UNION ALL
                    SELECT 'userdef', entity_id, measurement_id, hour_at, elapsed_us
                      FROM _measure.userdef_hour WHERE system_id = p_system AND hour_at = ANY (p_hours)
                    UNION ALL
                    SELECT 'tmf', entity_id, measurement_id, hour_at, elapsed_us
                      FROM _measure.tmf_hour WHERE system_id = p_system AND hour_at = ANY (p_hours)) x
                  ) x
     WHERE x.rn > 1
$$;
GRANT EXECUTE ON FUNCTION _measure.condense_shadow(smallint, timestamptz[]) TO measure_writer;

-- Figure 2's line of the given local days (_measure.cpu_trend_day): per day, the hour with
-- the largest average CPU queue length of any CPU (ties: earliest hour, then lowest CPU);
-- DELT = max - min over the CPUs in that hour. measure.report_cpu_trend reads the result.
CREATE OR REPLACE FUNCTION _measure.condense_trend_days(p_system smallint, p_days date[])
RETURNS void LANGUAGE sql AS $$
    DELETE FROM _measure.cpu_trend_day WHERE system_id = p_system AND day = ANY (p_days);
    INSERT INTO _measure.cpu_trend_day (system_id, day, hour_at, entity_id, cpu, qlen_max, qlen_delt,
                                        swap_max, busy_max, busy_delt)
    WITH h AS (
        SELECT c.hour_at, c.entity_id, c.cpu, c.qlen_avg, c.local_hour::date AS day,
               max(c.qlen_avg) OVER w AS hq_max, min(c.qlen_avg) OVER w AS hq_min,
               max(c.swap_avg) OVER w AS hs_max, max(c.busy_avg) OVER w AS hb_max,
               min(c.busy_avg) OVER w AS hb_min
          FROM measure.cpu_hour c
         WHERE c.system_id = p_system
           AND c.hour_at >= ((SELECT min(d) FROM unnest(p_days) d) + time '00:00') AT TIME ZONE 'UTC' - INTERVAL '1 day'
           AND c.hour_at < ((SELECT max(d) FROM unnest(p_days) d) + 2 + time '00:00') AT TIME ZONE 'UTC'
        WINDOW w AS (PARTITION BY c.hour_at))
    SELECT DISTINCT ON (h.day) p_system, h.day, h.hour_at, h.entity_id, h.cpu,
           h.hq_max, h.hq_max - h.hq_min, h.hs_max, h.hb_max, h.hb_max - h.hb_min
      FROM h
     WHERE h.day = ANY (p_days)
     ORDER BY h.day, h.qlen_avg DESC NULLS LAST, h.hour_at, h.cpu
$$;
GRANT EXECUTE ON FUNCTION _measure.condense_trend_days(smallint, date[]) TO measure_writer;

-- The threshold report's lines (Figure 1; _measure.threshold_line, schema/070-tiers-upkeep.sql)
-- of the given hours, or of every hour when p_hours is NULL, from the stored violations of
-- those hours (which must be current) and their hour-tier rows: the Figure 1 numbers exactly
-- as measure.cpu_hour computes them. measure.report_threshold reads the result.
CREATE OR REPLACE FUNCTION _measure.condense_threshold_lines(p_system smallint, p_hours timestamptz[])
RETURNS void LANGUAGE sql AS $$
    DELETE FROM _measure.threshold_line
     WHERE system_id = p_system AND (p_hours IS NULL OR hour_at = ANY (p_hours));
    INSERT INTO _measure.threshold_line (system_id, hour_at, cpu, qlen_max, qlen_delt, swap_max, busy_max,
                                         busy_delt, ibusy_max, qlen_avg, swap_avg, busy_avg, ibusy_avg, broken)
    SELECT p_system, h.hour_at, h.cpu, h.qlen_max, h.qlen_max - h.qlen_min, h.swap_max, h.busy_max,
           h.busy_max - h.busy_min, h.ibusy_max, measure.avg_queue_length(h.qlen_us, h.elapsed_us),
           measure.per_second(h.swaps, h.elapsed_us), measure.busy_percent(h.busy_us, h.elapsed_us),
           measure.busy_percent(h.ibusy_us, h.elapsed_us), v.broken
      FROM (SELECT b.hour_at, b.subject,
                   array_agg(b.item || ' ' || b.operator || ' ' || b.limit_value ORDER BY b.item) AS broken
              FROM _measure.hour_breach b
             WHERE b.system_id = p_system AND b.entity = 'cpu' AND (p_hours IS NULL OR b.hour_at = ANY (p_hours))
             GROUP BY b.hour_at, b.subject) v
      JOIN _measure.cpu_hour_best h
        ON h.system_id = p_system AND h.hour_at = v.hour_at AND h.cpu::text = v.subject
$$;
GRANT EXECUTE ON FUNCTION _measure.condense_threshold_lines(smallint, timestamptz[]) TO measure_writer;

-- Threshold edits: the lines follow the violations they are derived from, in the same
-- place (_measure.threshold_rebuild / condense_breaches, 040-dashboards.sql). The separate
-- triggers of an earlier release are dropped.
DROP TRIGGER IF EXISTS threshold_zlines_inserted ON _measure.threshold;
DROP TRIGGER IF EXISTS threshold_zlines_updated ON _measure.threshold;
DROP TRIGGER IF EXISTS threshold_zlines_deleted ON _measure.threshold;
DROP TRIGGER IF EXISTS threshold_zlines_truncated ON _measure.threshold;
DROP FUNCTION IF EXISTS _measure.threshold_lines_changed();

-- The shift-tier rows of the shifts in the temporary table _aff_shift (filled by the caller:
-- _measure.condense_upper, or a calendar change, 050-config.sql), from the hour tiers.
-- The items of a day of 2,000 entities are ~200,000 rows: they are grouped by hashing, in
-- memory (work_mem and enable_sort for this function only; sorting them by subject text
-- took seconds).
CREATE OR REPLACE FUNCTION _measure.condense_shift_rows(p_system smallint)
RETURNS void LANGUAGE plpgsql SET work_mem = '256MB' SET enable_sort = off AS $$
DECLARE
    v_lo timestamptz;
    v_hi timestamptz;
BEGIN
    SELECT min(start_at), max(end_at) INTO v_lo, v_hi FROM _aff_shift;
    IF v_lo IS NULL THEN
        RETURN;
    END IF;
    DELETE FROM _measure.tier_shift t
     WHERE t.system_id = p_system AND t.shift_day = ANY (ARRAY(SELECT shift_day FROM _aff_shift))
       AND (t.shift_day, t.shift_no) IN (SELECT shift_day, shift_no FROM _aff_shift);
    INSERT INTO _measure.tier_shift (system_id, entity, subject, item, shift_day, shift_no, hours,
                                     shift_hours, samples, elapsed_us, wsum, weight, vmin, vmax)
    -- the hour items are read once (MATERIALIZED), then matched to their shift by hour: every
    -- UTC hour start inside each affected shift (an equi-join; joined the other way round,
    -- the planner re-read the items once per affected shift)
    WITH i AS MATERIALIZED (
        SELECT * FROM _measure.hour_item
         WHERE system_id = p_system AND hour_at >= v_lo AND hour_at < v_hi),
    a AS MATERIALIZED (
        SELECT a.*, h AS hour_at
          FROM _aff_shift a
         CROSS JOIN LATERAL generate_series(
               date_bin(INTERVAL '1 hour', a.start_at + INTERVAL '1 hour' - INTERVAL '1 microsecond',
                        TIMESTAMPTZ '2000-01-01 00:00:00+00'),
               a.end_at - INTERVAL '1 microsecond', INTERVAL '1 hour') h)
    SELECT p_system, i.entity, i.subject, i.item, a.shift_day, a.shift_no,
           count(*), extract(epoch FROM a.end_at - a.start_at) / 3600,
           sum(i.samples), sum(i.elapsed_us),
           coalesce(sum(i.value * i.weight), 0), coalesce(sum(i.weight) FILTER (WHERE i.value IS NOT NULL), 0),
           min(i.value), max(i.value)
      FROM i JOIN a ON a.hour_at = i.hour_at
     GROUP BY i.entity, i.subject, i.item, a.shift_day, a.shift_no, a.start_at, a.end_at;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.condense_shift_rows(smallint) TO measure_writer;

-- Recompute the shifts that contain the given hours, then their months and years, from the
-- hour tiers (which must already be current for those hours).
DROP FUNCTION IF EXISTS _measure.condense_upper(smallint, timestamptz[]);
CREATE OR REPLACE FUNCTION _measure.condense_upper(p_system smallint, p_hours timestamptz[],
                                                   p_months boolean DEFAULT true)
RETURNS void LANGUAGE plpgsql SET work_mem = '256MB' SET enable_sort = off AS $$
DECLARE
    v_kept timestamptz;
    v_fresh timestamptz[];
BEGIN
    -- hours whose hour tiers retention dropped keep everything above them as it is
    v_kept := _measure.horizon('hour');
    IF EXISTS (SELECT 1 FROM unnest(p_hours) h WHERE h < v_kept) THEN
        v_fresh := _measure.fresh_hours(p_system, NULL, p_hours);
        p_hours := ARRAY(SELECT h FROM unnest(p_hours) h WHERE h >= v_kept OR h = ANY (v_fresh));
    END IF;
    IF cardinality(p_hours) = 0 THEN
        RETURN;
    END IF;
    IF to_regclass('pg_temp._aff_shift') IS NULL THEN  -- (IF NOT EXISTS would NOTICE on every call)
        CREATE TEMP TABLE _aff_shift (shift_day date, shift_no smallint,
                                      start_at timestamptz, end_at timestamptz)
            ON COMMIT DROP;
    END IF;
    PERFORM _measure.condense_shadow(p_system, p_hours);
    PERFORM _measure.condense_breaches(p_system, p_hours);  -- and the threshold lines; 040-dashboards.sql
    PERFORM _measure.condense_terminals(p_system, p_hours);  -- 040-dashboards.sql
    PERFORM _measure.condense_records(p_system, p_hours);  -- 024-record-tiers.sql
    PERFORM _measure.condense_trend_days(p_system, ARRAY(
        SELECT DISTINCT (h AT TIME ZONE s.time_zone)::date
          FROM unnest(p_hours) h, _measure.system s WHERE s.system_id = p_system));
    PERFORM _measure.condense_analysis(p_system, p_hours);  -- baselines and exceptions; 060-analysis.sql
    TRUNCATE _aff_shift;
    INSERT INTO _aff_shift SELECT * FROM _measure.shifts_of_hours(p_system, p_hours);
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM _measure.condense_shift_rows(p_system);

    IF p_months THEN
        PERFORM _measure.condense_months(p_system, p_hours);
    ELSE  -- left to _measure.condense_pending_months (the end of a backfill, the upkeep)
        INSERT INTO _measure.month_dirty (system_id, hour_at)
        SELECT p_system, h FROM unnest(p_hours) h
        ON CONFLICT (system_id, hour_at) DO NOTHING;
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.condense_upper(smallint, timestamptz[], boolean) TO measure_writer;

-- The month-level rows that come from the shift level, of the given local months and shift
-- numbers: the monthly terminal and threshold rollups (of those shift numbers) from their
-- shift rows, the month tier (every shift number of those months) from the shift tier, and
-- the year tier of their years from the month tier.
CREATE OR REPLACE FUNCTION _measure.condense_month_rows(p_system smallint, p_months date[], p_nos smallint[])
RETURNS void LANGUAGE plpgsql SET work_mem = '256MB' SET enable_sort = off AS $$
BEGIN
    IF p_months IS NULL OR cardinality(p_months) = 0 THEN
        RETURN;
    END IF;
    PERFORM _measure.terminal_months(p_system, p_months, p_nos);
    IF EXISTS (SELECT 1 FROM _measure.breach_state WHERE system_id = p_system) THEN
        PERFORM _measure.threshold_months(p_system, p_months, p_nos);
    END IF;
    DELETE FROM _measure.tier_month t
     WHERE t.system_id = p_system
       AND t.month = ANY (p_months);
    INSERT INTO _measure.tier_month (system_id, entity, subject, item, month, shift_no, shifts, hours,
                                     shift_hours, samples, elapsed_us, wsum, weight, vmin, vmax, delt_max)
    SELECT p_system, entity, subject, item, date_trunc('month', shift_day)::date, shift_no,
           count(*), sum(hours), sum(shift_hours), sum(samples), sum(elapsed_us), sum(wsum), sum(weight),
           min(vmin), max(vmax), max(vmax - vmin)
      FROM _measure.tier_shift
     WHERE system_id = p_system
       AND date_trunc('month', shift_day)::date = ANY (p_months)
     GROUP BY entity, subject, item, date_trunc('month', shift_day)::date, shift_no;

    DELETE FROM _measure.tier_year t
     WHERE t.system_id = p_system
       AND t.year IN (SELECT DISTINCT extract(year FROM m)::smallint FROM unnest(p_months) m);
    INSERT INTO _measure.tier_year (system_id, entity, subject, item, year, shift_no, months, hours,
                                    shift_hours, samples, elapsed_us, wsum, weight, vmin, vmax, delt_max)
    SELECT p_system, entity, subject, item, extract(year FROM month)::smallint, shift_no,
           count(*), sum(hours), sum(shift_hours), sum(samples), sum(elapsed_us), sum(wsum), sum(weight),
           min(vmin), max(vmax), max(delt_max)
      FROM _measure.tier_month
     WHERE system_id = p_system
       AND extract(year FROM month)::smallint IN (SELECT DISTINCT extract(year FROM m)::smallint FROM unnest(p_months) m)
     GROUP BY entity, subject, item, extract(year FROM month)::smallint, shift_no;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.condense_month_rows(smallint, date[], smallint[]) TO measure_writer;

-- The month-level rows of the months (and years) the given hours lie in, each from the rows
-- of the day level below it: the month and year tiers from the shift tier, the month rows of
-- the record tiers, response histograms and DISCOPEN file tier from their day rows, and the
-- monthly terminal and threshold rollups from their shift rows. Its cost grows with the
-- days of the month already condensed, so condensing during a backfill or live collection
-- defers it (_measure.condense(..., p_months => false) records the hours in
-- _measure.month_dirty) to once per backfill and per upkeep turn.
CREATE OR REPLACE FUNCTION _measure.condense_months(p_system smallint, p_hours timestamptz[])
RETURNS void LANGUAGE plpgsql SET work_mem = '256MB' SET enable_sort = off AS $$
DECLARE
    v_kept timestamptz := _measure.horizon('day');
BEGIN
    IF p_hours IS NULL OR cardinality(p_hours) = 0 THEN
        RETURN;
    END IF;
    IF to_regclass('pg_temp._aff_shift') IS NULL THEN  -- (IF NOT EXISTS would NOTICE on every call)
        CREATE TEMP TABLE _aff_shift (shift_day date, shift_no smallint,
                                      start_at timestamptz, end_at timestamptz)
            ON COMMIT DROP;
    END IF;
    TRUNCATE _aff_shift;
    INSERT INTO _aff_shift
    SELECT s.* FROM _measure.shifts_of_hours(p_system, p_hours) s
     -- a month whose first days retention dropped keeps the rows it has
     WHERE NOT isfinite(v_kept) OR date_trunc('month', s.shift_day)::date >= (v_kept AT TIME ZONE 'UTC')::date;
    PERFORM _measure.condense_records_months(p_system, p_hours);
    PERFORM _measure.condense_month_rows(p_system, ARRAY(SELECT DISTINCT date_trunc('month', shift_day)::date FROM _aff_shift),
                                         ARRAY(SELECT DISTINCT shift_no FROM _aff_shift));
END
$$;
GRANT EXECUTE ON FUNCTION _measure.condense_months(smallint, timestamptz[]) TO measure_writer;

-- The month-level rows of every hour _measure.month_dirty holds (all systems, or one);
-- returns the hours done.
CREATE OR REPLACE FUNCTION _measure.condense_pending_months(p_system smallint DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint;
    v_hours timestamptz[];
    v_total integer := 0;
BEGIN
    FOR v_sys IN SELECT DISTINCT system_id FROM _measure.month_dirty
                  WHERE p_system IS NULL OR system_id = p_system ORDER BY 1 LOOP
        WITH gone AS (DELETE FROM _measure.month_dirty WHERE system_id = v_sys RETURNING hour_at)
        SELECT array_agg(hour_at ORDER BY hour_at) INTO v_hours FROM gone;
        PERFORM _measure.condense_months(v_sys, v_hours);
        v_total := v_total + coalesce(cardinality(v_hours), 0);
    END LOOP;
    RETURN v_total;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.condense_pending_months(smallint) TO measure_writer;

-- A database condensed before schema/050-read-paths.sql: its trend lines, computed once
-- (a system with CPU hours but no trend line yet).
DO $backfill$
DECLARE
    v_sys smallint;
BEGIN
    -- (read from the tiers alone: on Citus both are distributed by system_id, co-located)
    FOR v_sys IN SELECT DISTINCT h.system_id FROM _measure.cpu_hour h
                  WHERE NOT EXISTS (SELECT 1 FROM _measure.cpu_trend_day t WHERE t.system_id = h.system_id) LOOP
        PERFORM _measure.condense_trend_days(v_sys, ARRAY(
            SELECT DISTINCT (h.hour_at AT TIME ZONE s.time_zone)::date
              FROM _measure.cpu_hour h JOIN _measure.system s USING (system_id)
             WHERE h.system_id = v_sys));
    END LOOP;
END
$backfill$;

DROP FUNCTION IF EXISTS _measure.purge_blocker(timestamptz);  -- retention: 026-retention.sql

-- ---------------------------------------------------------------- public shift/month/year views

-- measure.<entity>_shift, _month and _year pivot the long upper tiers into one row per
-- subject and bucket with, per item of measure.tier_item: <item>_avg (time-weighted),
-- <item>_max, <item>_min and <item>_delt (shift: max - min of the hourly values; month and
-- year: the largest delt of the tier below, Figure 8's BUSY-DELT-M = MAX(BUSY-DELT-D)).
-- Generated here from the catalogue's tier items (measure.tier_item) so that the three tiers
-- of the entity types with tiers cannot drift apart; each column carries its ENFORM name as a
-- comment (QLEN-AVG-D ...). The subject columns of each type are written out below.
DO $gen$
DECLARE
    ent text;
    tier text;
    subj text;
    joins text;
    bucket text;
    counts text;
    items text;
    comments text[];
    r record;
    suffix text;
    delt text;
BEGIN
    FOREACH ent IN ARRAY _measure.tiered_entities() LOOP
        subj := CASE ent
            WHEN 'cpu' THEN 't.subject::smallint AS cpu'
            WHEN 'tmf' THEN 't.subject::smallint AS cpu'
            WHEN 'disc' THEN 't.subject AS volume'
            WHEN 'line' THEN 'e.ids->>''device_name'' AS line, e.cpu'
            WHEN 'process' THEN 'e.cpu, (e.ids->>''pin'')::integer AS pin, e.ids->>''process_name'' AS process_name, '
                                || 'e.ids->>''program_file_name'' AS program_file_name, (e.ids->>''priority'')::integer AS priority'
            WHEN 'userdef' THEN 'e.cpu, (e.ids->>''pin'')::integer AS pin, e.ids->>''process_name'' AS process_name, '
                                || 'e.ids->>''program_file_name'' AS program_file_name, upper(e.ids->>''name'') AS counter_name, '
                                || '(e.ids->>''index'')::integer AS counter_index'
        END;
        IF subj IS NULL THEN
            RAISE EXCEPTION 'the catalogue gives entity type % tiers, but its tier views have no subject columns', ent
                USING HINT = 'write them in schema/idempotent/020-tiers.sql (and its hour tier), or empty its tier_order in schema/catalog/entities.csv';
        END IF;
        joins := CASE WHEN ent IN ('line', 'process', 'userdef')
                      THEN ' LEFT JOIN _measure.entity e ON e.entity_id = t.subject::bigint' ELSE '' END;
        FOREACH tier IN ARRAY ARRAY['shift', 'month', 'year'] LOOP
            bucket := CASE tier WHEN 'shift' THEN 'shift_day' WHEN 'month' THEN 'month' ELSE 'year' END;
            counts := CASE tier WHEN 'shift' THEN 'max(hours) AS hours'
                                WHEN 'month' THEN 'max(shifts) AS shifts, max(hours) AS hours'
                                ELSE 'max(months) AS months, max(hours) AS hours' END;
            suffix := CASE tier WHEN 'shift' THEN '-D' WHEN 'month' THEN '-M' ELSE '-Y' END;
            delt := CASE tier WHEN 'shift' THEN 'max(vmax) - min(vmin)' ELSE 'max(delt_max)' END;
            items := '';
            comments := ARRAY[]::text[];
            FOR r IN SELECT item, enform FROM _measure.tier_item WHERE entity = ent ORDER BY position LOOP
                items := items || format(
                    E',\n       sum(wsum) FILTER (WHERE item = %1$L) / nullif(sum(weight) FILTER (WHERE item = %1$L), 0) AS %2$I'
                    ',\n       max(vmax) FILTER (WHERE item = %1$L) AS %3$I'
                    ',\n       min(vmin) FILTER (WHERE item = %1$L) AS %4$I'
                    ',\n       %5$s AS %6$I',
                    r.item, r.item || '_avg', r.item || '_max', r.item || '_min',
                    replace(delt, ')', ') FILTER (WHERE item = ' || quote_literal(r.item) || ')'),
                    r.item || '_delt');
                comments := comments
                    || format('COMMENT ON COLUMN measure.%I.%I IS %L', ent || '_' || tier, r.item || '_avg', r.enform || '-AVG' || suffix || ' (time-weighted)')
                    || format('COMMENT ON COLUMN measure.%I.%I IS %L', ent || '_' || tier, r.item || '_max', r.enform || '-MAX' || suffix)
                    || format('COMMENT ON COLUMN measure.%I.%I IS %L', ent || '_' || tier, r.item || '_min', r.enform || '-MIN' || suffix)
                    || format('COMMENT ON COLUMN measure.%I.%I IS %L', ent || '_' || tier, r.item || '_delt', r.enform || '-DELT' || suffix);
            END LOOP;
            EXECUTE format($v$
CREATE OR REPLACE VIEW measure.%1$I AS
SELECT s.system_name, %2$s, t.%3$I, t.shift_no, t.%4$s, t.shift_hours,
       t.elapsed_us / (t.shift_hours * 3.6e9) AS coverage_ratio, t.samples%5$s,
       t.system_id, t.subject
  FROM (SELECT system_id, subject, %3$I, shift_no, %6$s, max(shift_hours) AS shift_hours,
               max(elapsed_us) AS elapsed_us, max(samples) AS samples%7$s
          FROM _measure.tier_%8$s WHERE entity = %9$L
         GROUP BY system_id, subject, %3$I, shift_no) t
  JOIN _measure.system s USING (system_id)%10$s$v$,
                ent || '_' || tier, subj, bucket,
                CASE tier WHEN 'shift' THEN 'hours' WHEN 'month' THEN 'shifts, t.hours' ELSE 'months, t.hours' END,
                (SELECT string_agg(format(E',\n       t.%1$I, t.%2$I, t.%3$I, t.%4$I', item || '_avg', item || '_max', item || '_min', item || '_delt'), '' ORDER BY position)
                   FROM _measure.tier_item WHERE entity = ent),
                counts, items, tier, ent, joins);
            EXECUTE format('GRANT SELECT ON measure.%I TO measure_writer, measure_api, measure_reader', ent || '_' || tier);
            EXECUTE format('COMMENT ON VIEW measure.%I IS %L', ent || '_' || tier,
                           upper(ent) || ' ' || tier || ' tier (ENFORM ' ||
                           CASE tier WHEN 'shift' THEN 'Figure 6, CPUSHFT<n>' WHEN 'month' THEN 'Figure 8, CPLNYEAR' ELSE 'years over months' END ||
                           '): one row per system, subject, ' || bucket || ' and shift; coverage_ratio = measured time / shift length.');
            FOR i IN 1 .. coalesce(array_length(comments, 1), 0) LOOP
                EXECUTE comments[i];
            END LOOP;
        END LOOP;
    END LOOP;
END
$gen$;
