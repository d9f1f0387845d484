-- 040-dashboards: what the Grafana dashboards and alert rules (dashboards/) read, on top of
-- the public hour/shift/month views and the report functions. Readable by measure_reader
-- (Grafana's read-only role) and measure_api.
--
--   measure.shift                     the shifts in force per system (the `shift` variable)
--   measure.dashboard_tier(from, to)  which tier fits a time range: 'hour' up to 7 days
--                                     (+1 h of slack), 'shift' up to 92 days, else 'month'
--   measure.local_day(system, at)     the system's local date of an instant
--   measure.<entity>_series(system, from, to, shifts)
--                                     one time series shape for every tier: bucket_at
--                                     (hour start, shift start, or month start in the
--                                     system's time zone), the tier used, the shift (NULL on
--                                     the month tier, whose rows combine the chosen shifts,
--                                     weighted by measured time), the subject columns and
--                                     <item>_avg / <item>_max per ENFORM item of
--                                     measure.tier_item. Only the branch of the tier that
--                                     dashboard_tier picks runs (the others are gated off by
--                                     a one-time filter), so Grafana needs no logic of its own.
--   measure.threshold_check(system, from, to, entity, item, broken)
--                                     every threshold in force (measure.threshold) evaluated
--                                     on every hour row in [from, to]: value, limit, broken
--                                     (optionally only one item, only the broken rows).
--                                     Items must be columns of measure.<entity>_hour; a
--                                     threshold naming anything else is reported as an error.
--   measure.capacity_series(system, from, to, capacity, horizon_days)
--                                     the daily peak-hour busy % per CPU and disc volume,
--                                     its least-squares trend extended horizon_days past
--                                     `to`, the ±15 % band and the capacity line
--                                     (measure.report_capacity_forecast gives the dates).
--
-- Dashboard SQL passes Grafana's $__timeFrom() / $__timeTo() (quoted RFC 3339 literals) as
-- the from/to arguments; no expression ever has to go inside a macro's parentheses.

-- ---------------------------------------------------------------- shifts, tiers, days

CREATE OR REPLACE VIEW measure.shift AS
SELECT s.system_name, ss.shift_no, ss.name, ss.begin_time, ss.end_time, ss.crosses_midnight,
       ss.system_id
  FROM _measure.system_shift ss JOIN _measure.system s USING (system_id);
GRANT SELECT ON measure.shift TO measure_writer, measure_api, measure_reader;
COMMENT ON VIEW measure.shift IS
    'Shifts in force per system (its own, else the defaults): number, name, local [begin, end).';

CREATE OR REPLACE FUNCTION measure.dashboard_tier(p_from timestamptz, p_to timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN extract(epoch FROM p_to - p_from) <= 7 * 86400 + 3600 THEN 'hour'
                WHEN extract(epoch FROM p_to - p_from) <= 92 * 86400 THEN 'shift'
                ELSE 'month' END
$$;
GRANT EXECUTE ON FUNCTION measure.dashboard_tier(timestamptz, timestamptz)
    TO measure_writer, measure_api, measure_reader;

CREATE OR REPLACE FUNCTION measure.local_day(p_system text, p_at timestamptz)
RETURNS date LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT (p_at AT TIME ZONE s.time_zone)::date
      FROM _measure.system s WHERE s.system_id = measure.system_id_of(p_system)
$$;
REVOKE ALL ON FUNCTION measure.local_day(text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.local_day(text, timestamptz) TO measure_writer, measure_api, measure_reader;

-- ---------------------------------------------------------------- series over the tiers

DO $gen$
DECLARE
    ent text;
    subj text[];      -- subject column names
    subj_t text[];    -- and their types
    ret text;
    sel_h text;
    sel_s text;
    sel_m text;
    grp text;
    src_s text;
    src_m text;
    r record;
    ct text := 'coalesce((SELECT c->>''type'' FROM _measure.measurement m, '
               'jsonb_array_elements(coalesce(m.contab->''counters'', ''[]'')) c '
               'WHERE m.system_id = x.system_id AND upper(c->>''name'') = x.counter_name '
               'ORDER BY m.measurement_id DESC LIMIT 1), ''ACCUM'')';
    in_shift text := 'CASE WHEN ss.crosses_midnight '
                     'THEN h.local_hour::time >= ss.begin_time OR h.local_hour::time < ss.end_time '
                     'ELSE h.local_hour::time >= ss.begin_time AND h.local_hour::time < ss.end_time END';
BEGIN
    FOREACH ent IN ARRAY ARRAY['cpu', 'disc', 'line', 'process', 'userdef', 'tmf'] LOOP
        CASE ent
            WHEN 'cpu', 'tmf' THEN subj := ARRAY['cpu']; subj_t := ARRAY['smallint'];
            WHEN 'disc' THEN subj := ARRAY['volume']; subj_t := ARRAY['text'];
            WHEN 'line' THEN subj := ARRAY['line', 'cpu']; subj_t := ARRAY['text', 'smallint'];
            WHEN 'process' THEN
                subj := ARRAY['cpu', 'pin', 'process_name', 'program_file_name'];
                subj_t := ARRAY['smallint', 'integer', 'text', 'text'];
            WHEN 'userdef' THEN
                subj := ARRAY['cpu', 'pin', 'process_name', 'counter_name', 'counter_index', 'counter_type'];
                subj_t := ARRAY['smallint', 'integer', 'text', 'text', 'integer', 'text'];
        END CASE;
        ret := 'bucket_at timestamptz, tier text, shift_no smallint';
        sel_h := 'h.hour_at, ''hour''::text, ss.shift_no';
        sel_s := '(v.shift_day + ss.begin_time) AT TIME ZONE ss.time_zone, ''shift''::text, v.shift_no';
        sel_m := '(v.month + time ''00:00'') AT TIME ZONE s.time_zone, ''month''::text, NULL::smallint';
        grp := 'v.month, s.time_zone';
        FOR i IN 1 .. array_length(subj, 1) LOOP
            ret := ret || format(', %I %s', subj[i], subj_t[i]);
            sel_h := sel_h || format(', h.%I', subj[i]);
            sel_s := sel_s || format(', v.%I', subj[i]);
            sel_m := sel_m || format(', v.%I', subj[i]);
            grp := grp || format(', v.%I', subj[i]);
        END LOOP;
        -- item, its hour-view column for the average and for the interval maximum
        FOR r IN SELECT i.item, coalesce(m.avg_col, i.item || '_avg') AS avg_col,
                        CASE WHEN m.item IS NULL THEN i.item || '_max' ELSE m.max_col END AS max_col
                   FROM measure.tier_item i
                   LEFT JOIN (VALUES
                       ('disc', 'seek_busy', 'seek_busy_avg', NULL),
                       ('disc', 'cache_hits', 'cache_hits_per_second', NULL),
                       ('disc', 'cache_misses', 'cache_misses_per_second', NULL),
                       ('disc', 'hit_ratio', 'cache_hit_ratio', NULL),
                       ('disc', 'byte_rate', 'bytes_per_second', NULL),
                       ('line', 'requests', 'requests_per_second', NULL),
                       ('line', 'byte_rate', 'bytes_per_second', NULL),
                       ('line', 'tps', 'transactions_per_second', NULL),
                       ('line', 'response', 'response_seconds_avg', NULL),
                       ('process', 'ready_busy', 'ready_busy_ratio', NULL),
                       ('cpu', 'sbusy', 'sbusy_avg', 'sbusy_max'),
                       ('tmf', 'lifetime', 'lifetime_seconds_avg', NULL))
                       AS m (entity, item, avg_col, max_col) ON m.entity = i.entity AND m.item = i.item
                  WHERE i.entity = ent LOOP
            ret := ret || format(', %I numeric, %I numeric', r.item || '_avg', r.item || '_max');
            sel_h := sel_h || format(', h.%I', r.avg_col)
                     || CASE WHEN r.max_col IS NULL THEN ', NULL::numeric' ELSE format(', h.%I', r.max_col) END;
            sel_s := sel_s || format(', v.%I, v.%I', r.item || '_avg', r.item || '_max');
            sel_m := sel_m || format(', sum(v.%1$I * v.coverage_ratio * v.shift_hours)'
                                     ' / nullif(sum(v.coverage_ratio * v.shift_hours) FILTER (WHERE v.%1$I IS NOT NULL), 0)'
                                     ', max(v.%2$I)', r.item || '_avg', r.item || '_max');
        END LOOP;
        src_s := format('measure.%I', ent || '_shift');
        src_m := format('measure.%I', ent || '_month');
        IF ent = 'userdef' THEN
            src_s := format('(SELECT x.*, %s AS counter_type FROM measure.userdef_shift x)', ct);
            src_m := format('(SELECT x.*, %s AS counter_type FROM measure.userdef_month x)', ct);
        END IF;
        EXECUTE format('DROP FUNCTION IF EXISTS measure.%I(text, timestamptz, timestamptz, integer[])',
                       ent || '_series');
        EXECUTE format($f$
CREATE FUNCTION measure.%1$I(p_system text, p_from timestamptz, p_to timestamptz,
                             p_shifts integer[] DEFAULT NULL)
RETURNS TABLE (%2$s)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    SELECT %3$s
      FROM measure.%4$I h
      JOIN _measure.system_shift ss ON ss.system_id = h.system_id AND %5$s
     WHERE measure.dashboard_tier(p_from, p_to) = 'hour'
       AND h.system_id = (SELECT measure.system_id_of(p_system))
       AND h.hour_at >= p_from AND h.hour_at <= p_to
       AND (p_shifts IS NULL OR ss.shift_no = ANY (p_shifts))
    UNION ALL
    SELECT %6$s
      FROM %7$s v
      JOIN _measure.system_shift ss ON ss.system_id = v.system_id AND ss.shift_no = v.shift_no
     WHERE measure.dashboard_tier(p_from, p_to) = 'shift'
       AND v.system_id = (SELECT measure.system_id_of(p_system))
       AND v.shift_day >= (p_from - INTERVAL '2 days')::date AND v.shift_day <= (p_to + INTERVAL '1 day')::date
       AND (v.shift_day + ss.begin_time) AT TIME ZONE ss.time_zone >= p_from
       AND (v.shift_day + ss.begin_time) AT TIME ZONE ss.time_zone <= p_to
       AND (p_shifts IS NULL OR v.shift_no = ANY (p_shifts))
    UNION ALL
    SELECT %8$s
      FROM %9$s v
      JOIN _measure.system s ON s.system_id = v.system_id
     WHERE measure.dashboard_tier(p_from, p_to) = 'month'
       AND v.system_id = (SELECT measure.system_id_of(p_system))
       AND v.month >= (p_from - INTERVAL '32 days')::date AND v.month <= (p_to + INTERVAL '1 day')::date
       AND (v.month + time '00:00') AT TIME ZONE s.time_zone < p_to
       AND ((v.month + INTERVAL '1 month') + time '00:00') AT TIME ZONE s.time_zone > p_from
       AND (p_shifts IS NULL OR v.shift_no = ANY (p_shifts))
     GROUP BY %10$s
     ORDER BY 1, 4
$body$$f$,
            ent || '_series', ret, sel_h, ent || '_hour', in_shift, sel_s, src_s, sel_m, src_m, grp);
        EXECUTE format('REVOKE ALL ON FUNCTION measure.%I(text, timestamptz, timestamptz, integer[]) FROM PUBLIC',
                       ent || '_series');
        EXECUTE format('GRANT EXECUTE ON FUNCTION measure.%I(text, timestamptz, timestamptz, integer[]) '
                       'TO measure_writer, measure_api, measure_reader', ent || '_series');
        EXECUTE format('COMMENT ON FUNCTION measure.%I(text, timestamptz, timestamptz, integer[]) IS %L',
                       ent || '_series',
                       upper(ent) || ' items of the tier that fits [from, to] (measure.dashboard_tier): '
                       || '<item>_avg and <item>_max per bucket; shifts NULL = all.');
    END LOOP;
END
$gen$;

-- ---------------------------------------------------------------- thresholds

-- The items of the thresholds in force for one entity type (of one system, or of all when
-- p_sys is NULL; of one item when p_item is given) as a VALUES list over the hour view
-- `v`, NULL when there are none; raises when a threshold names no numeric column.
CREATE OR REPLACE FUNCTION _measure.threshold_items(p_sys smallint, p_entity text, p_item text)
RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_bad text;
    v_items text;
BEGIN
    SELECT string_agg(DISTINCT t.item, ', ') INTO v_bad
      FROM measure.threshold t
     WHERE t.entity = p_entity AND (p_sys IS NULL OR t.system_id = p_sys)
       AND NOT EXISTS (SELECT 1 FROM pg_attribute a
                        WHERE a.attrelid = format('measure.%I', p_entity || '_hour')::regclass
                          AND a.attname = t.item AND a.attnum > 0 AND NOT a.attisdropped
                          AND a.atttypid = 'numeric'::regtype);
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'threshold item(s) % of % are not numeric columns of measure.%_hour',
              v_bad, p_entity, p_entity USING ERRCODE = 'invalid_parameter_value',
              HINT = 'fix _measure.threshold.item (e.g. busy_max, qlen_delt)';
    END IF;
    SELECT string_agg(DISTINCT format('(%L, v.%I)', t.item, t.item), ', ') INTO v_items
      FROM measure.threshold t WHERE t.entity = p_entity AND (p_sys IS NULL OR t.system_id = p_sys)
       AND (p_item IS NULL OR t.item = p_item);
    RETURN v_items;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.threshold_items(smallint, text, text) TO measure_writer;

-- The query that evaluates those items on the hour rows: parameters $1 system (NULL: all),
-- $2/$3 the range of hour_at, $4 only the broken rows (when true), $5 only these hours
-- (NULL: all of the range). Columns as measure.threshold_check returns them. p_store: for
-- _measure.hour_breach, every hour whatever its shift (shift_no NULL: shifts are data, the
-- readers join them) and unordered.
DROP FUNCTION IF EXISTS _measure.threshold_query(text, text);
CREATE OR REPLACE FUNCTION _measure.threshold_query(p_entity text, p_items text, p_store boolean DEFAULT false)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format($q$
        SELECT v.system_name, %1$L::text, concat_ws(' ', %2$s), v.hour_at, %5$s,
               x.item, x.value, t.operator, t.limit_value,
               coalesce(measure.breaks(x.value, t.operator, t.limit_value), false)
          FROM measure.%3$I v%6$s
         CROSS JOIN LATERAL (VALUES %4$s) x (item, value)
          JOIN measure.threshold t ON t.system_id = v.system_id AND t.entity = %1$L AND t.item = x.item
         WHERE ($1 IS NULL OR v.system_id = $1) AND v.hour_at >= $2 AND v.hour_at <= $3
           AND ($4 IS NOT TRUE OR measure.breaks(x.value, t.operator, t.limit_value))
           AND ($5 IS NULL OR v.hour_at = ANY ($5))%7$s$q$,
        p_entity,
        CASE p_entity WHEN 'cpu' THEN 'v.cpu' WHEN 'tmf' THEN 'v.cpu' WHEN 'disc' THEN 'v.volume'
                      WHEN 'line' THEN 'v.line'
                      WHEN 'process' THEN 'v.cpu, v.pin, v.process_name'
                      ELSE 'v.process_name, v.counter_name, v.counter_index' END,
        p_entity || '_hour', p_items,
        CASE WHEN p_store THEN 'NULL::smallint' ELSE 'ss.shift_no' END,
        -- the local time of day once per row (OFFSET 0 keeps it from being inlined into every
        -- comparison with every shift: a time zone conversion each)
        CASE WHEN p_store THEN '' ELSE $j$
         CROSS JOIN LATERAL (SELECT v.local_hour::time AS t OFFSET 0) lt
          JOIN _measure.system_shift ss ON ss.system_id = v.system_id
           AND CASE WHEN ss.crosses_midnight THEN lt.t >= ss.begin_time OR lt.t < ss.end_time
                    ELSE lt.t >= ss.begin_time AND lt.t < ss.end_time END$j$ END,
        CASE WHEN p_store THEN '' ELSE $o$
         ORDER BY v.hour_at, 3, x.item$o$ END)
$$;
GRANT EXECUTE ON FUNCTION _measure.threshold_query(text, text, boolean) TO measure_writer;

-- Every threshold in force evaluated on every hour row of [p_from, p_to] (all systems when
-- p_system is NULL; all entity types when p_entity is NULL). subject as in
-- measure.report_threshold_items: the CPU number, volume, line, "cpu pin process" or
-- "process counter index". p_item: only the thresholds on that item (a panel of one item
-- reads one column); p_broken = true: only the rows that break their threshold, read from
-- the violations stored at condense time (_measure.hour_breach) when they are complete for
-- the system. Both only filter: the rows returned are exactly those of the full call that
-- have item = p_item / broken.
DROP FUNCTION IF EXISTS measure.threshold_check(text, timestamptz, timestamptz, text);
CREATE OR REPLACE FUNCTION measure.threshold_check(p_system text, p_from timestamptz, p_to timestamptz,
                                                   p_entity text DEFAULT NULL, p_item text DEFAULT NULL,
                                                   p_broken boolean DEFAULT NULL)
RETURNS TABLE (system_name text, entity text, subject text, hour_at timestamptz, shift_no smallint,
               item text, value numeric, operator text, limit_value numeric, broken boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_sys smallint := CASE WHEN p_system IS NULL THEN NULL ELSE measure.system_id_of(p_system) END;
    v_ent text;
    v_items text;
BEGIN
    IF p_entity IS NOT NULL AND p_entity NOT IN ('cpu', 'disc', 'line', 'process', 'userdef', 'tmf') THEN
        RAISE EXCEPTION 'unknown entity %', p_entity USING ERRCODE = 'invalid_parameter_value',
              HINT = 'entity: one of cpu, disc, line, process, userdef, tmf';
    END IF;
    IF p_broken AND v_sys IS NOT NULL
       AND EXISTS (SELECT 1 FROM _measure.breach_state b WHERE b.system_id = v_sys) THEN
        RETURN QUERY
        SELECT s.system_name, b.entity, b.subject, b.hour_at, ss.shift_no, b.item, b.value,
               b.operator, b.limit_value, true
          FROM _measure.hour_breach b
          JOIN _measure.system s ON s.system_id = b.system_id
         CROSS JOIN LATERAL (SELECT (b.hour_at AT TIME ZONE s.time_zone)::time AS t OFFSET 0) lt
          JOIN _measure.system_shift ss ON ss.system_id = b.system_id
           AND CASE WHEN ss.crosses_midnight THEN lt.t >= ss.begin_time OR lt.t < ss.end_time
                    ELSE lt.t >= ss.begin_time AND lt.t < ss.end_time END
         WHERE b.system_id = v_sys AND b.hour_at >= p_from AND b.hour_at <= p_to
           AND (p_entity IS NULL OR b.entity = p_entity) AND (p_item IS NULL OR b.item = p_item)
         ORDER BY b.entity, b.hour_at, b.subject, b.item;
        RETURN;
    END IF;
    FOR v_ent IN SELECT DISTINCT t.entity FROM measure.threshold t
                  WHERE (v_sys IS NULL OR t.system_id = v_sys) AND (p_entity IS NULL OR t.entity = p_entity)
                  ORDER BY 1 LOOP
        v_items := _measure.threshold_items(v_sys, v_ent, p_item);
        CONTINUE WHEN v_items IS NULL;
        RETURN QUERY EXECUTE _measure.threshold_query(v_ent, v_items)
        USING v_sys, p_from, p_to, p_broken, NULL::timestamptz[];
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION measure.threshold_check(text, timestamptz, timestamptz, text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.threshold_check(text, timestamptz, timestamptz, text, text, boolean)
    TO measure_writer, measure_api, measure_reader;

-- Keep the stored violations of one system (called by _measure.condense_upper after the hour
-- tiers and _measure.hour_shadow of p_hours are current): those of p_hours when the
-- system's violations are complete, else all of its hours (first condensing after a
-- threshold or definition change). Thresholds that cannot be evaluated (an item that is no
-- column) leave the system incomplete: readers evaluate, and report that error themselves.
CREATE OR REPLACE FUNCTION _measure.condense_breaches(p_system smallint, p_hours timestamptz[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_all boolean := NOT EXISTS (SELECT 1 FROM _measure.breach_state WHERE system_id = p_system);
    v_hours timestamptz[] := CASE WHEN v_all THEN NULL ELSE p_hours END;
    v_from timestamptz := CASE WHEN v_all THEN '-infinity' ELSE (SELECT min(h) FROM unnest(p_hours) h) END;
    v_to timestamptz := CASE WHEN v_all THEN 'infinity' ELSE (SELECT max(h) FROM unnest(p_hours) h) END;
    v_ent text;
    v_items text;
BEGIN
    IF v_all THEN
        DELETE FROM _measure.hour_breach WHERE system_id = p_system;
    ELSE
        DELETE FROM _measure.hour_breach WHERE system_id = p_system AND hour_at = ANY (p_hours);
    END IF;
    BEGIN
        FOR v_ent IN SELECT DISTINCT t.entity FROM measure.threshold t WHERE t.system_id = p_system LOOP
            v_items := _measure.threshold_items(p_system, v_ent, NULL);
            CONTINUE WHEN v_items IS NULL;
            EXECUTE 'INSERT INTO _measure.hour_breach (system_id, entity, subject, hour_at, item, value, '
                    'operator, limit_value) SELECT $1, q.entity, q.subject, q.hour_at, q.item, q.value, '
                    'q.operator, q.limit_value FROM (' || _measure.threshold_query(v_ent, v_items, true) || ') q '
                    '(system_name, entity, subject, hour_at, shift_no, item, value, operator, limit_value, broken)'
            USING p_system, v_from, v_to, true, v_hours;
        END LOOP;
        IF v_all THEN
            INSERT INTO _measure.breach_state (system_id) VALUES (p_system);
        END IF;
    EXCEPTION WHEN invalid_parameter_value THEN
        DELETE FROM _measure.breach_state WHERE system_id = p_system;
    END;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.condense_breaches(smallint, timestamptz[]) TO measure_writer;

-- A change of the thresholds makes every system's stored violations incomplete.
CREATE OR REPLACE FUNCTION _measure.threshold_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM _measure.breach_state;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS threshold_changed ON _measure.threshold;
CREATE TRIGGER threshold_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON _measure.threshold
    FOR EACH STATEMENT EXECUTE FUNCTION _measure.threshold_changed();

-- ... and so does a change of the hour views the items are columns of (a new release).
DO $basis$
DECLARE
    v_fp text := md5(concat_ws('|', pg_get_viewdef('measure.cpu_hour'::regclass),
                               pg_get_viewdef('measure.disc_hour'::regclass),
                               pg_get_viewdef('measure.line_hour'::regclass),
                               pg_get_viewdef('measure.process_hour'::regclass),
                               pg_get_viewdef('measure.userdef_hour'::regclass),
                               pg_get_viewdef('measure.tmf_hour'::regclass),
                               pg_get_functiondef('_measure.threshold_query(text, text, boolean)'::regprocedure)));
BEGIN
    IF v_fp IS DISTINCT FROM (SELECT fingerprint FROM _measure.breach_basis) THEN
        DELETE FROM _measure.breach_state;
        INSERT INTO _measure.breach_basis (fingerprint) VALUES (v_fp)
            ON CONFLICT (one) DO UPDATE SET fingerprint = excluded.fingerprint;
    END IF;
END
$basis$;

-- ---------------------------------------------------------------- capacity

CREATE OR REPLACE FUNCTION measure.capacity_series(p_system text, p_from timestamptz, p_to timestamptz,
                                                   p_capacity numeric DEFAULT 70,
                                                   p_horizon_days integer DEFAULT 90)
RETURNS TABLE (day_at timestamptz, entity text, subject text, peak_busy numeric, trend_busy numeric,
               band_low numeric, band_high numeric, capacity numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH sys AS (
        SELECT s.system_id, s.time_zone, (p_from AT TIME ZONE s.time_zone)::date AS d0,
               (p_to AT TIME ZONE s.time_zone)::date AS d1
          FROM _measure.system s WHERE s.system_id = measure.system_id_of(p_system)),
    d AS (
        SELECT 'cpu'::text AS entity, v.cpu::text AS subject, v.shift_day AS day, max(v.busy_max) AS peak
          FROM sys JOIN measure.cpu_shift v ON v.system_id = sys.system_id
         WHERE v.shift_day BETWEEN sys.d0 AND sys.d1 GROUP BY 1, 2, 3
        UNION ALL
        SELECT 'disc', v.volume, v.shift_day, max(v.busy_max)
          FROM sys JOIN measure.disc_shift v ON v.system_id = sys.system_id
         WHERE v.shift_day BETWEEN sys.d0 AND sys.d1 GROUP BY 1, 2, 3),
    fit AS (
        SELECT d.entity, d.subject, regr_slope(d.peak, d.day - sys.d0)::numeric AS slope,
               regr_intercept(d.peak, d.day - sys.d0)::numeric AS icpt
          FROM d, sys GROUP BY 1, 2)
    SELECT (g.day + time '00:00') AT TIME ZONE sys.time_zone, f.entity, f.subject, d.peak,
           round(f.icpt + f.slope * (g.day - sys.d0), 3),
           round(0.85 * (f.icpt + f.slope * (g.day - sys.d0)), 3),
           round(1.15 * (f.icpt + f.slope * (g.day - sys.d0)), 3),
           p_capacity
      FROM sys
     CROSS JOIN fit f
     CROSS JOIN LATERAL (SELECT gs::date AS day
                           FROM generate_series(sys.d0, sys.d1 + p_horizon_days, INTERVAL '1 day') gs) g
      LEFT JOIN d ON d.entity = f.entity AND d.subject = f.subject AND d.day = g.day
     ORDER BY 1, 2, 3
$$;
REVOKE ALL ON FUNCTION measure.capacity_series(text, timestamptz, timestamptz, numeric, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.capacity_series(text, timestamptz, timestamptz, numeric, integer)
    TO measure_writer, measure_api, measure_reader;
