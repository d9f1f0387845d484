-- 025-reports: the ENFORM reports of the 1986 articles as SQL functions (measure.report_*),
-- readable by measure_api and measure_reader. queries/<name>.sql call them with named
-- parameters; core/reports.py renders them (text in the ENFORM layout, CSV, JSON).
-- Each function is SECURITY DEFINER with a fixed search_path: readers see the result,
-- never the storage. An unknown system is an error (P0002) naming it.

CREATE OR REPLACE FUNCTION measure.system_id_of(p_system text)
RETURNS smallint LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v smallint;
BEGIN
    -- \DEMO, \demo or DEMO: the backslash and upper case may be left out (as on the CLI)
    SELECT system_id INTO v FROM _measure.system
     WHERE upper(system_name) = upper(CASE WHEN left(btrim(p_system), 1) = '\' THEN btrim(p_system)
                                           ELSE '\' || btrim(p_system) END);
    IF v IS NULL THEN
        RAISE EXCEPTION 'unknown system %', p_system USING ERRCODE = 'no_data_found',
              HINT = 'system: one of ' || coalesce((SELECT string_agg(system_name, ', ' ORDER BY system_name)
                                                   FROM _measure.system), '(none yet)');
    END IF;
    RETURN v;
END
$$;
REVOKE ALL ON FUNCTION measure.system_id_of(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.system_id_of(text) TO measure_writer, measure_api, measure_reader;

-- Which threshold row decides each (entity, item, operator) for the hours of each shift number
-- of each system, the most specific first (as the ENFORM shift reports read a system's
-- threshold items): the system's row for that shift, else the system's row for every shift,
-- else the default row for that shift, else the default row for every shift. So a system's row
-- for shift 3 replaces the default for shift 3's hours only; its other shifts keep theirs. The
-- winner may be a row that is not enabled: it switches that threshold off for those hours.
CREATE OR REPLACE VIEW _measure.threshold_winner AS
SELECT DISTINCT ON (s.system_id, n.shift_no, t.entity, t.item, t.operator)
       s.system_id, n.shift_no::smallint AS shift_no, t.entity, t.item, t.operator, t.threshold_id
  FROM _measure.system s
 CROSS JOIN generate_series(1, 9) n (shift_no)
  JOIN _measure.threshold t ON (t.system_id = s.system_id OR t.system_id IS NULL)
                           AND (t.shift_no = n.shift_no OR t.shift_no IS NULL)
 ORDER BY s.system_id, n.shift_no, t.entity, t.item, t.operator, t.system_id IS NULL, t.shift_no IS NULL;
GRANT SELECT ON _measure.threshold_winner TO measure_writer;

-- The threshold rows each system takes: those that decide the hours of at least one of its
-- shifts (enabled or not); own: the system's row, else a default.
CREATE OR REPLACE VIEW _measure.threshold_owned AS
SELECT s.system_id, t.threshold_id, t.entity, t.item, t.operator, t.shift_no, t.limit_value, t.enabled,
       t.help, t.system_id IS NOT NULL AS own
  FROM _measure.system s
  JOIN _measure.threshold t ON t.system_id = s.system_id OR t.system_id IS NULL
 WHERE EXISTS (SELECT 1 FROM _measure.threshold_winner w
                WHERE w.system_id = s.system_id AND w.threshold_id = t.threshold_id);
GRANT SELECT ON _measure.threshold_owned TO measure_writer;

-- The thresholds in force for a system: the enabled rows it takes (_measure.threshold_owned).
-- shift_no: the row holds for the hours of that shift (NULL: of every shift that no more
-- specific row decides; _measure.threshold_by_shift resolves that).
CREATE OR REPLACE VIEW measure.threshold AS
SELECT s.system_name, o.entity, o.item, o.operator, o.limit_value, o.help, s.system_id, o.shift_no
  FROM _measure.threshold_owned o JOIN _measure.system s ON s.system_id = o.system_id
 WHERE o.enabled;
GRANT SELECT ON measure.threshold TO measure_writer, measure_api, measure_reader;

-- The thresholds that hold for the hours of each shift number of each system: the deciding
-- row's limit (_measure.threshold_winner), when it is enabled. Hours in no shift are not
-- evaluated (as the shift reports leave them out).
CREATE OR REPLACE VIEW _measure.threshold_by_shift AS
SELECT w.system_id, w.shift_no, w.entity, w.item, w.operator, t.limit_value
  FROM _measure.threshold_winner w JOIN _measure.threshold t ON t.threshold_id = w.threshold_id
 WHERE t.enabled;
GRANT SELECT ON _measure.threshold_by_shift TO measure_writer;

CREATE OR REPLACE FUNCTION measure.breaks(value numeric, operator text, limit_value numeric)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE operator WHEN '>' THEN value > limit_value WHEN '>=' THEN value >= limit_value
                         WHEN '<' THEN value < limit_value WHEN '<=' THEN value <= limit_value END
$$;
GRANT EXECUTE ON FUNCTION measure.breaks(numeric, text, numeric) TO measure_writer, measure_api, measure_reader;

-- Threshold violations of any entity type on one shift day (all shifts when p_shift is
-- NULL): one row per subject, hour and broken threshold ("use similar queries for process,
-- disk, line and USERDEF data"). Items are columns of measure.<entity>_hour.
CREATE OR REPLACE FUNCTION measure.report_threshold_items(p_system text, p_day date,
                                                          p_shift integer DEFAULT NULL,
                                                          p_entity text DEFAULT 'cpu')
RETURNS TABLE (entity text, subject text, hour_at timestamptz, time_of_day text, shift_no smallint,
               item text, value numeric, operator text, limit_value numeric)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_sys smallint := measure.system_id_of(p_system);
    v_items text;
BEGIN
    IF p_entity <> ALL (_measure.tiered_entities()) THEN
        RAISE EXCEPTION 'unknown entity %', p_entity USING ERRCODE = 'invalid_parameter_value',
              HINT = 'entity: one of ' || array_to_string(_measure.tiered_entities(), ', ');
    END IF;
    -- the items of the thresholds in force that are columns of the hour view, each read as
    -- numeric (an item naming no column has no value and never breaks)
    SELECT string_agg(format('(%L, %s)', a.attname,
                             CASE WHEN a.atttypid = 'numeric'::regtype THEN format('v.%I', a.attname)
                                  ELSE format('v.%I::text::numeric', a.attname) END), ', ')
      INTO v_items
      FROM (SELECT DISTINCT t.item FROM measure.threshold t
             WHERE t.system_id = v_sys AND t.entity = p_entity) t
      JOIN pg_attribute a ON a.attrelid = format('measure.%I', p_entity || '_hour')::regclass
                         AND a.attname = t.item AND a.attnum > 0 AND NOT a.attisdropped;
    IF v_items IS NULL THEN
        RETURN;
    END IF;
    -- the violations stored at condense time (040-dashboards.sql), while complete for the system
    IF EXISTS (SELECT 1 FROM _measure.breach_state b WHERE b.system_id = v_sys) THEN
        RETURN QUERY
        SELECT p_entity, b.subject, b.hour_at,
               to_char(b.hour_at AT TIME ZONE (SELECT s.time_zone FROM _measure.system s WHERE s.system_id = v_sys),
                       'HH24:MI'),
               sh.shift_no, b.item, b.value, b.operator, b.limit_value
          FROM _measure.hour_breach b
          JOIN _measure.shift_hours(v_sys, (p_day + time '00:00') AT TIME ZONE 'UTC' - INTERVAL '1 day',
                                    (p_day + 3 + time '00:00') AT TIME ZONE 'UTC') sh ON sh.hour_at = b.hour_at
         WHERE b.system_id = v_sys AND b.entity = p_entity
           -- every hour of shift day p_day lies in [p_day 00:00, p_day + 2 00:00) local time
           AND b.hour_at >= (p_day + time '00:00') AT TIME ZONE (SELECT s.time_zone FROM _measure.system s WHERE s.system_id = v_sys)
           AND b.hour_at < (p_day + 2 + time '00:00') AT TIME ZONE (SELECT s.time_zone FROM _measure.system s WHERE s.system_id = v_sys)
           AND sh.shift_day = p_day AND (p_shift IS NULL OR sh.shift_no = p_shift)
         ORDER BY b.subject, b.hour_at, b.item;
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format($q$
        SELECT %3$L::text, h.subject, h.hour_at, to_char(h.local_hour, 'HH24:MI'), sh.shift_no,
               t.item, h.value, t.operator, t.limit_value
          FROM (SELECT v.hour_at, v.local_hour, x.item, x.value, concat_ws(' ', %2$s) AS subject
                  FROM measure.%1$I v
                 CROSS JOIN LATERAL (VALUES %4$s) x (item, value)
                 WHERE v.system_id = $1
                   AND v.hour_at >= ($2 - 1 + time '00:00') AT TIME ZONE 'UTC' - INTERVAL '1 day'
                   AND v.hour_at < ($2 + 3 + time '00:00') AT TIME ZONE 'UTC') h
          JOIN _measure.shift_hours($1, ($2 - 1 + time '00:00') AT TIME ZONE 'UTC' - INTERVAL '1 day',
                                    ($2 + 3 + time '00:00') AT TIME ZONE 'UTC') sh ON sh.hour_at = h.hour_at
          JOIN _measure.threshold_by_shift t ON t.system_id = $1 AND t.shift_no = sh.shift_no
           AND t.entity = %3$L AND t.item = h.item
         WHERE sh.shift_day = $2 AND ($3 IS NULL OR sh.shift_no = $3)
           AND measure.breaks(h.value, t.operator, t.limit_value)
         ORDER BY h.subject, h.hour_at, t.item$q$,
        p_entity || '_hour',
        CASE p_entity WHEN 'cpu' THEN 'v.cpu' WHEN 'tmf' THEN 'v.cpu' WHEN 'disc' THEN 'v.volume'
                      WHEN 'line' THEN 'v.line'
                      WHEN 'process' THEN 'v.cpu, v.pin, v.process_name'
                      ELSE 'v.process_name, v.counter_name, v.counter_index' END,
        p_entity, v_items)
    USING v_sys, p_day, p_shift;
END
$$;
REVOKE ALL ON FUNCTION measure.report_threshold_items(text, date, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_threshold_items(text, date, integer, text)
    TO measure_writer, measure_api, measure_reader;

-- Figure 9 / Figure 1: the CPU-hours of one shift day that break at least one CPU
-- threshold, with the Figure 1 columns in order.
-- While the system's violations stored at condense time are complete (_measure.breach_state)
-- the report reads the lines decided then (_measure.threshold_line, 070-tiers-upkeep.sql):
-- the lines of the 48 hours around the shift day (one index range), each hour placed in its
-- shift (the calendar's hours of the range, joined by hour); time of day and OS version are
-- joined here. Otherwise (thresholds just edited, until the next condensing) it evaluates every
-- threshold on the hour tier
-- (measure.report_threshold_items). Both give the same rows (tests/queries/test_reports.py).
CREATE OR REPLACE FUNCTION measure.report_threshold(p_system text, p_day date, p_shift integer DEFAULT NULL)
RETURNS TABLE (cpu smallint, time_of_day text, hour_at timestamptz, shift_no smallint,
               qlen_max numeric, qlen_delt numeric, swap_max numeric, busy_max numeric,
               busy_delt numeric, ibusy_max numeric, qlen_avg numeric, swap_avg numeric,
               busy_avg numeric, ibusy_avg numeric, os_version text, broken text[])
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
-- planned once per session: its statements are index ranges whatever the day (custom plans
-- re-planned them on every call, about as long as running them)
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_sys smallint := measure.system_id_of(p_system);
    v_tz text;
    v_os text;
    v_lo timestamptz;
    v_hi timestamptz;
BEGIN
    SELECT s.time_zone, s.os_version INTO v_tz, v_os FROM _measure.system s WHERE s.system_id = v_sys;
    -- every hour of shift day p_day starts in [p_day 00:00, p_day + 2 00:00) local time
    v_lo := (p_day + time '00:00') AT TIME ZONE v_tz;
    v_hi := (p_day + 2 + time '00:00') AT TIME ZONE v_tz;
    IF EXISTS (SELECT 1 FROM _measure.breach_state b WHERE b.system_id = v_sys) THEN
        RETURN QUERY
        WITH l AS MATERIALIZED (
            SELECT t.* FROM _measure.threshold_line t
             WHERE t.system_id = v_sys AND t.hour_at >= v_lo AND t.hour_at < v_hi),
        hrs AS MATERIALIZED (
            SELECT sh.hour_at, sh.shift_no
              FROM _measure.shift_hours(v_sys, v_lo, v_hi) sh
             WHERE sh.shift_day = p_day AND (p_shift IS NULL OR sh.shift_no = p_shift))
        SELECT l.cpu, to_char(l.hour_at AT TIME ZONE v_tz, 'HH24:MI'), l.hour_at, hrs.shift_no,
               l.qlen_max, l.qlen_delt, l.swap_max, l.busy_max, l.busy_delt, l.ibusy_max,
               l.qlen_avg, l.swap_avg, l.busy_avg, l.ibusy_avg, v_os, l.broken
          FROM l JOIN hrs ON hrs.hour_at = l.hour_at
         ORDER BY l.cpu, l.hour_at;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT h.cpu, to_char(h.local_hour, 'HH24:MI'), h.hour_at, v.shift_no,
           h.qlen_max, h.qlen_delt, h.swap_max, h.busy_max, h.busy_delt, h.ibusy_max,
           h.qlen_avg, h.swap_avg, h.busy_avg, h.ibusy_avg, h.os_version, v.broken
      FROM (SELECT i.hour_at, i.subject, min(i.shift_no) AS shift_no,
                   array_agg(i.item || ' ' || i.operator || ' ' || i.limit_value ORDER BY i.item) AS broken
              FROM measure.report_threshold_items(p_system, p_day, p_shift, 'cpu') i
             GROUP BY i.hour_at, i.subject) v
      JOIN measure.cpu_hour h
        ON h.system_id = v_sys AND h.hour_at = v.hour_at AND h.cpu::text = v.subject
       AND h.hour_at >= v_lo AND h.hour_at < v_hi
     ORDER BY h.cpu, h.hour_at;
END
$$;
REVOKE ALL ON FUNCTION measure.report_threshold(text, date, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_threshold(text, date, integer)
    TO measure_writer, measure_api, measure_reader;

-- Figure 2: per local day, the hour with the largest average CPU queue length of any CPU
-- (ties: earliest hour, then lowest CPU); DELT = max - min over the CPUs in that hour.
-- Each day's line is computed when its hours are condensed (_measure.condense_trend_days);
-- names are joined here, so a renamed system or a new OS version shows at once.
CREATE OR REPLACE FUNCTION measure.report_cpu_trend(p_system text, p_from date, p_to date)
RETURNS TABLE (system_name text, day date, loadid text, cpu smallint, cpu_type text,
               os_version text, qlen_max numeric, qlen_delt numeric, swap_max numeric,
               busy_max numeric, busy_delt numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT s.system_name, t.day, measure.loadid(t.hour_at AT TIME ZONE s.time_zone), t.cpu,
           coalesce(e.ids->>'cpu_type',
                    (SELECT ct.cpu_type FROM _measure.system_cpu_type ct
                      WHERE ct.system_id = t.system_id AND (ct.cpu = t.cpu OR ct.cpu IS NULL)
                      ORDER BY ct.cpu NULLS LAST LIMIT 1)), s.os_version, t.qlen_max, t.qlen_delt, t.swap_max, t.busy_max,
           t.busy_delt
      FROM _measure.cpu_trend_day t
      JOIN _measure.system s ON s.system_id = t.system_id
      JOIN _measure.entity e ON e.entity_id = t.entity_id
     WHERE t.system_id = measure.system_id_of(p_system) AND t.day BETWEEN p_from AND p_to
     ORDER BY t.day
$$;
REVOKE ALL ON FUNCTION measure.report_cpu_trend(text, date, date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_cpu_trend(text, date, date) TO measure_writer, measure_api, measure_reader;

-- ---------------------------------------------------------------- process and file reports
-- ("Performance Considerations for Application Processes", Figures 1-7): over the interval
-- records whose FROM-TIMESTAMP lies in [p_from, p_to) (optionally of one measurement).

CREATE OR REPLACE FUNCTION _measure.window_sums(p_system smallint, p_type text, p_from timestamptz,
                                                p_to timestamptz, p_measurement integer)
RETURNS TABLE (entity_id bigint, record_at timestamptz, ids jsonb, cpu smallint,
               first_at timestamptz, last_at timestamptz, run_us numeric, c numeric[])
LANGUAGE sql STABLE AS $$
    -- one row per counter record (entity incarnation): summed deltas (negative clamped to 0);
    -- without p_measurement, per entity and hour the measurement with the most measured time
    -- (the hour tiers' rule: two measurements of one entity never count it twice). From the
    -- record tiers and interval records (_measure.record_window, 024-record-tiers.sql).
    -- (the identifying fields looked up per record: a filter of the caller on ids, estimated
    -- at one entity, made the planner rescan the window sums once per matching entity)
    SELECT w.entity_id, w.record_at, e.ids, w.cpu, w.first_at, w.last_at, w.run_us, w.c
      FROM _measure.record_window(p_system, (SELECT t.type_code FROM _measure.entity_type t WHERE t.entity = p_type),
                                  p_from, p_to, p_measurement) w
     CROSS JOIN LATERAL (SELECT e.ids FROM _measure.entity e WHERE e.entity_id = w.entity_id OFFSET 0) e
$$;
GRANT EXECUTE ON FUNCTION _measure.window_sums(smallint, text, timestamptz, timestamptz, integer) TO measure_writer;

CREATE OR REPLACE FUNCTION measure.report_process_summary(p_system text, p_from timestamptz,
                                                          p_to timestamptz, p_measurement integer DEFAULT NULL)
RETURNS TABLE (program_file_name text, process_count bigint, cpu_seconds numeric,
               messages_received numeric, messages_sent numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT w.ids->>'program_file_name', count(*), sum(w.c[1]) / 1e6, sum(w.c[7]), sum(w.c[6])
      FROM _measure.window_sums(measure.system_id_of(p_system), 'process', p_from, p_to, p_measurement) w
     GROUP BY 1 ORDER BY 1
$$;
REVOKE ALL ON FUNCTION measure.report_process_summary(text, timestamptz, timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_process_summary(text, timestamptz, timestamptz, integer)
    TO measure_writer, measure_api, measure_reader;

CREATE OR REPLACE FUNCTION measure.report_busy_process(p_system text, p_from timestamptz, p_to timestamptz,
                                                       p_min_cpu_seconds numeric DEFAULT 600,
                                                       p_max_priority integer DEFAULT 200,
                                                       p_measurement integer DEFAULT NULL)
RETURNS TABLE (program_file_name text, process_name text, cpu smallint, pin integer,
               run_seconds numeric, cpu_seconds numeric, cpu_utilization_ratio numeric,
               io_per_second numeric, priority integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT w.ids->>'program_file_name', w.ids->>'process_name', w.cpu, (w.ids->>'pin')::integer,
           w.run_us / 1e6, w.c[1] / 1e6, w.c[1] / nullif(w.run_us, 0),
           measure.per_second(w.c[6], w.run_us), (w.ids->>'priority')::integer
      FROM _measure.window_sums(measure.system_id_of(p_system), 'process', p_from, p_to, p_measurement) w
     WHERE w.c[1] / 1e6 > p_min_cpu_seconds AND (w.ids->>'priority')::integer < p_max_priority
     ORDER BY w.c[1] DESC, 1, 2
$$;
REVOKE ALL ON FUNCTION measure.report_busy_process(text, timestamptz, timestamptz, numeric, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_busy_process(text, timestamptz, timestamptz, numeric, integer, integer)
    TO measure_writer, measure_api, measure_reader;

CREATE OR REPLACE FUNCTION measure.report_process_activity(p_system text, p_from timestamptz, p_to timestamptz,
                                                           p_measurement integer DEFAULT NULL)
RETURNS TABLE (program_file_name text, process_name text, cpu smallint, pin integer,
               cpu_seconds_per_trans numeric, io_per_trans numeric, cpu_seconds_per_io numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT w.ids->>'program_file_name', w.ids->>'process_name', w.cpu, (w.ids->>'pin')::integer,
           w.c[1] / w.c[7] / 1e6, w.c[6] / w.c[7], w.c[1] / w.c[6] / 1e6
      FROM _measure.window_sums(measure.system_id_of(p_system), 'process', p_from, p_to, p_measurement) w
     WHERE w.c[7] > 0 AND w.c[6] > 0
     ORDER BY w.c[1] DESC, 1, 2
$$;
REVOKE ALL ON FUNCTION measure.report_process_activity(text, timestamptz, timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_process_activity(text, timestamptz, timestamptz, integer)
    TO measure_writer, measure_api, measure_reader;

-- Figure 5: the disc FILE opens (DEVICE-TYPE 3) of the processes in CPU p_cpu (and PIN
-- p_pin, if given), one row per file with the process's header columns repeated.
CREATE OR REPLACE FUNCTION measure.report_process_disc_file_activity(p_system text, p_from timestamptz,
                                                                     p_to timestamptz, p_cpu integer,
                                                                     p_pin integer DEFAULT NULL)
RETURNS TABLE (process_name text, cpu smallint, pin integer, program_file_name text,
               from_at timestamptz, to_at timestamptz, cpu_busy_seconds numeric,
               messages_sent numeric, messages_received numeric, file_name text,
               reads numeric, writes numeric, deletes_or_writereads numeric, info_calls numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH p AS (SELECT * FROM _measure.window_sums(measure.system_id_of(p_system), 'process', p_from, p_to, NULL)
                WHERE cpu = p_cpu AND (p_pin IS NULL OR (ids->>'pin')::integer = p_pin)),
         f AS (SELECT * FROM _measure.window_sums(measure.system_id_of(p_system), 'file', p_from, p_to, NULL)
                WHERE (ids->>'device_type')::integer = 3)
    SELECT p.ids->>'process_name', p.cpu, (p.ids->>'pin')::integer, p.ids->>'program_file_name',
           p.first_at, p.last_at, p.c[1] / 1e6, p.c[6], p.c[7], f.ids->>'file_name',
           f.c[2], f.c[3], f.c[5], f.c[6]
      FROM p JOIN f ON (f.ids->>'opener_cpu')::integer = p.cpu
                   AND (f.ids->>'opener_pin')::integer = (p.ids->>'pin')::integer
                   AND f.first_at < p.last_at AND f.last_at > p.first_at
     ORDER BY p.cpu, 3, p.first_at, f.ids->>'file_name'
$$;
REVOKE ALL ON FUNCTION measure.report_process_disc_file_activity(text, timestamptz, timestamptz, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_process_disc_file_activity(text, timestamptz, timestamptz, integer, integer)
    TO measure_writer, measure_api, measure_reader;

CREATE OR REPLACE FUNCTION measure.report_file_summary(p_system text, p_from timestamptz, p_to timestamptz,
                                                       p_measurement integer DEFAULT NULL)
RETURNS TABLE (file_name text, open_count bigint, reads numeric, writes numeric, updates numeric,
               deletes numeric, info_calls numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT w.ids->>'file_name', count(*), sum(w.c[2]), sum(w.c[3]), sum(w.c[4]), sum(w.c[5]), sum(w.c[6])
      FROM _measure.window_sums(measure.system_id_of(p_system), 'file', p_from, p_to, p_measurement) w
     WHERE (w.ids->>'device_type')::integer = 3 AND strpos(w.ids->>'file_name', '#') = 0
       AND w.c[2] + w.c[3] + w.c[4] + w.c[5] + w.c[6] > 0
     GROUP BY 1 ORDER BY 1
$$;
REVOKE ALL ON FUNCTION measure.report_file_summary(text, timestamptz, timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_file_summary(text, timestamptz, timestamptz, integer)
    TO measure_writer, measure_api, measure_reader;

-- ENFORM's WHERE applies to each structured (interval) record: the sums are those of the
-- interval records with DRIVER-INPUT-CALLS + DRIVER-OUTPUT-CALLS > 0, and COUNT is the opens
-- (counter records) with at least one such record in the window (_measure.discopen_window).
CREATE OR REPLACE FUNCTION measure.report_discopen_summary(p_system text, p_from timestamptz, p_to timestamptz,
                                                           p_measurement integer DEFAULT NULL)
RETURNS TABLE (file_name text, open_count bigint, input_calls numeric, cache_hits numeric,
               output_calls numeric, block_splits numeric, stalls numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT w.file_name, w.open_count, w.c[2], w.c[4], w.c[3], w.c[7], w.c[8]
      FROM _measure.discopen_window(measure.system_id_of(p_system), p_from, p_to, p_measurement) w
     WHERE strpos(w.file_name, '#') = 0 AND w.open_count > 0
     ORDER BY 1
$$;
REVOKE ALL ON FUNCTION measure.report_discopen_summary(text, timestamptz, timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_discopen_summary(text, timestamptz, timestamptz, integer)
    TO measure_writer, measure_api, measure_reader;

-- ATM article Table 4/5: CPU milliseconds per transaction by component, with the lines below
-- the components (average and 95 % response, transactions per second per CPU, total CPU
-- utilisation). Components come from _measure.component_map; system overhead = CPU busy -
-- busy of every measured process (the article's definition).
--
-- Transactions: the MESSAGES-RECEIVED of the processes named p_transaction_process (a LIKE
-- pattern), or by default the terminal transactions of the window, from the first of these
-- that counted any: TERMINAL TRANSACTIONS, LINE TRANSACTIONS (summed over the line's
-- subdevices), CPU TRANSACTIONS (counted in the CPU of the terminal's TCP).
--
-- Response (response_source names the entity type used: the same order, terminal first):
--   response_seconds_avg = sum RESPONSE-TIME / sum TRANSACTIONS over the window (exact);
--   response_seconds_p95 = the transaction-weighted 95th percentile of the mean response of
--       each interval record (one terminal over one interval): the smallest record mean m
--       such that the records whose mean is <= m hold at least 95 % of the transactions.
--       MEASURE keeps sums, never single responses, so this is exact when every record holds
--       one transaction (an ATM's terminal at 1-2 transactions a minute with 1-minute
--       intervals is close to that) and is pulled towards the mean when a record averages
--       several. response_transactions_per_sample says how many transactions a record
--       averages (1 = exact); a LINE or CPU source averages many terminals and gives little
--       more than the mean. Shorter intervals or measuring TERMINALs sharpen the figure.
--       The record means are kept in 1 % bins (_measure.response_hist, so a year of
--       terminals is a few thousand rows): the figure is the largest mean of the bin that
--       holds that m, i.e. m itself or at most 1 % above it (m itself when the bin holds one
--       distinct mean).
--   One measurement per entity and hour counts (the most measured time), as in the tiers.
CREATE OR REPLACE FUNCTION _measure.transaction_response(p_system smallint, p_from timestamptz,
                                                         p_to timestamptz)
RETURNS TABLE (source text, transactions numeric, response_seconds_avg numeric,
               response_seconds_p95 numeric, transactions_per_sample numeric)
LANGUAGE sql STABLE AS $$
    WITH h AS (
        SELECT s.ord, s.entity, w.*
          FROM _measure.response_window(p_system, p_from, p_to) w
          JOIN _measure.response_source s USING (type_code)
         WHERE w.transactions > 0),
    chosen AS (
        SELECT h.*, sum(h.transactions) OVER (ORDER BY h.bin ROWS UNBOUNDED PRECEDING) AS cum,
               sum(h.transactions) OVER () AS total
          FROM h
         WHERE h.ord = (SELECT min(ord) FROM h))
    SELECT min(entity), sum(transactions), sum(response_us) / sum(transactions) / 1e6,
           min(mean_max_us) FILTER (WHERE cum >= 0.95 * total) / 1e6,
           sum(transactions) / sum(records)
      FROM chosen
$$;
GRANT EXECUTE ON FUNCTION _measure.transaction_response(smallint, timestamptz, timestamptz) TO measure_writer;

-- (a changed result type needs the old function dropped first)
DO $drop$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_proc
                WHERE oid = to_regprocedure('measure.report_transaction_resource(text, timestamptz, timestamptz, text)')
                  AND NOT 'response_seconds_p95' = ANY (proargnames)) THEN
        DROP FUNCTION measure.report_transaction_resource(text, timestamptz, timestamptz, text);
    END IF;
END
$drop$;

CREATE OR REPLACE FUNCTION measure.report_transaction_resource(p_system text, p_from timestamptz,
                                                               p_to timestamptz,
                                                               p_transaction_process text DEFAULT NULL)
RETURNS TABLE (component text, cpu_ms_per_transaction numeric, cpu_seconds numeric,
               transactions numeric, transactions_per_second_per_cpu numeric,
               cpu_utilization_percent numeric, response_seconds_avg numeric,
               response_seconds_p95 numeric, response_source text,
               response_transactions_per_sample numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH sys AS (SELECT measure.system_id_of(p_system) AS id),
    cpu AS (SELECT sum(w.c[1]) AS busy_us, sum(w.run_us) AS run_us, count(*) AS cpus
              FROM sys, _measure.window_sums(sys.id, 'cpu', p_from, p_to, NULL) w),
    proc AS (SELECT w.*, coalesce((
                 SELECT m.component FROM _measure.component_map m
                  WHERE (m.system_id IS NULL OR m.system_id = (SELECT id FROM sys))
                    AND upper(w.ids->>m.match_on) LIKE upper(m.pattern)
                  ORDER BY m.priority, m.component_map_id LIMIT 1), 'other') AS component
               FROM sys, _measure.window_sums(sys.id, 'process', p_from, p_to, NULL) w),
    resp AS MATERIALIZED (SELECT r.* FROM sys, _measure.transaction_response(sys.id, p_from, p_to) r),
    tx AS (SELECT CASE WHEN p_transaction_process IS NULL THEN (SELECT transactions FROM resp)
                       ELSE (SELECT sum(c[7]) FROM proc WHERE ids->>'process_name' LIKE p_transaction_process) END AS n),
    parts AS (SELECT component, sum(c[1]) AS busy_us FROM proc GROUP BY component
              UNION ALL
              SELECT 'system_overhead', (SELECT busy_us FROM cpu) - coalesce((SELECT sum(c[1]) FROM proc), 0)
              UNION ALL
              SELECT 'total', (SELECT busy_us FROM cpu))
    SELECT p.component, p.busy_us / 1e3 / nullif(tx.n, 0), p.busy_us / 1e6, tx.n,
           measure.per_second(tx.n, (SELECT run_us FROM cpu)),
           measure.busy_percent((SELECT busy_us FROM cpu), (SELECT run_us FROM cpu)),
           r.response_seconds_avg, r.response_seconds_p95, r.source, r.transactions_per_sample
      FROM parts p CROSS JOIN tx LEFT JOIN resp r ON true
     ORDER BY 1
$$;
REVOKE ALL ON FUNCTION measure.report_transaction_resource(text, timestamptz, timestamptz, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_transaction_resource(text, timestamptz, timestamptz, text)
    TO measure_writer, measure_api, measure_reader;

-- "Capacity Planning Concepts": per CPU and disc volume, the daily peak-hour busy % (the
-- largest hourly busy of the day, from the shift tier), its least-squares trend over the
-- window, the date the trend crosses p_capacity (default 70 %) and the same at +15 % and
-- -15 % of the estimate (crossing_early / crossing_late), the month tier's peak for
-- reference, and for CPUs a what-if: the peak if the busiest other CPU halted and its load
-- were spread evenly over the remaining CPUs.
-- (The month peaks are grouped per entity and subject and joined, not read by a lateral
-- subquery per fitted line: Citus runs no lateral join from a CTE into a distributed table,
-- and the one definition then serves every engine.)
CREATE OR REPLACE FUNCTION measure.report_capacity_forecast(p_system text, p_from date, p_to date,
                                                            p_capacity numeric DEFAULT 70)
RETURNS TABLE (entity text, subject text, days bigint, peak_busy_first numeric, peak_busy_last numeric,
               slope_per_day numeric, crossing_date date, crossing_early date, crossing_late date,
               month_peak numeric, busy_if_one_halted numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH d AS (
        SELECT t.entity, t.subject, t.shift_day AS day, max(t.vmax) AS peak
          FROM _measure.tier_shift t
         WHERE t.system_id = measure.system_id_of(p_system) AND t.item = 'busy'
           AND t.entity IN ('cpu', 'disc') AND t.shift_day BETWEEN p_from AND p_to
         GROUP BY 1, 2, 3),
    fit AS (
        SELECT entity, subject, count(*) AS days,
               regr_slope(peak, day - p_from)::numeric AS slope, regr_intercept(peak, day - p_from)::numeric AS icpt,
               (array_agg(peak ORDER BY day))[1] AS first_peak,
               (array_agg(peak ORDER BY day DESC))[1] AS last_peak
          FROM d GROUP BY 1, 2),
    ncpu AS (SELECT count(*) AS n FROM fit WHERE entity = 'cpu'),
    m AS (
        SELECT tm.entity, tm.subject, max(tm.vmax) AS month_peak FROM _measure.tier_month tm
         WHERE tm.system_id = measure.system_id_of(p_system) AND tm.entity IN ('cpu', 'disc') AND tm.item = 'busy'
           AND tm.month BETWEEN date_trunc('month', p_from)::date AND p_to
         GROUP BY 1, 2),
    cross_at AS (
        SELECT f.*, m.month_peak,
               CASE WHEN f.slope > 0 THEN p_from + ceil((p_capacity - f.icpt) / f.slope)::integer END AS at_est,
               CASE WHEN f.slope > 0 THEN p_from + ceil((p_capacity / 1.15 - f.icpt) / f.slope)::integer END AS at_early,
               CASE WHEN f.slope > 0 THEN p_from + ceil((p_capacity / 0.85 - f.icpt) / f.slope)::integer END AS at_late
          FROM fit f
          LEFT JOIN m ON m.entity = f.entity AND m.subject = f.subject)
    SELECT c.entity, c.subject, c.days, round(c.first_peak, 3), round(c.last_peak, 3), round(c.slope, 6),
           CASE WHEN c.at_est IS NOT NULL THEN greatest(c.at_est, p_from) END,
           CASE WHEN c.at_early IS NOT NULL THEN greatest(c.at_early, p_from) END,
           CASE WHEN c.at_late IS NOT NULL THEN greatest(c.at_late, p_from) END,
           round(c.month_peak, 3),
           CASE WHEN c.entity = 'cpu' AND (SELECT n FROM ncpu) > 1 THEN round(c.last_peak + (
               SELECT max(o.last_peak) FROM fit o WHERE o.entity = 'cpu' AND o.subject <> c.subject)
               / ((SELECT n FROM ncpu) - 1), 3) END
      FROM cross_at c
     ORDER BY c.entity, CASE WHEN c.entity = 'cpu' THEN lpad(c.subject, 4, '0') ELSE c.subject END
$$;
REVOKE ALL ON FUNCTION measure.report_capacity_forecast(text, date, date, numeric) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_capacity_forecast(text, date, date, numeric)
    TO measure_writer, measure_api, measure_reader;
