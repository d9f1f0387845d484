-- 040-dashboards: what the Grafana dashboards and alert rules (dashboards/) read, on top of
-- the public hour/shift/month views and the report functions. Readable by measure_reader
-- (Grafana's read-only role) and measure_api.
--
--   measure.shift                     the shifts in force per system (the `shift` variable)
--   measure.dashboard_tier(from, to)  which tier fits a time range: 'hour' up to 7 days
--                                     (+1 h of slack), 'shift' up to 92 days, else 'month'
--   measure.local_day(system, at)     the system's local date of an instant
--   measure.hour_start(at) / measure.hour_end(at)
--                                     the UTC hour an instant is in, and the end of that hour
--                                     (at itself when it is a whole hour): the report panels
--                                     widen the time range to whole hours, which the record
--                                     tiers hold (090-record-tiers.sql); a partial hour would be
--                                     read from interval records (an hour of every DISCOPEN of
--                                     the reference node is 600,000 of them)
--   measure.<entity>_series(system, from, to, shifts, items)
--                                     one time series shape for every tier: bucket_at
--                                     (hour start, shift start, or month start in the
--                                     system's time zone), the tier used, the shift (NULL on
--                                     the month tier, whose rows combine the chosen shifts,
--                                     weighted by measured time), the subject columns and
--                                     <item>_avg / <item>_max per ENFORM item of
--                                     measure.tier_item. Only the branch of the tier that
--                                     dashboard_tier picks runs (the others are gated off by
--                                     a one-time filter), so Grafana needs no logic of its own.
--                                     items (tier_item names): only those are read from the
--                                     shift and month tiers (a panel of one item reads a
--                                     quarter of the rows of a process); the others are NULL.
--   measure.threshold_check(system, from, to, entity, item, broken)
--                                     every threshold in force (measure.threshold) evaluated
--                                     on every hour row in [from, to]: value, limit, broken
--                                     (optionally only one item, only the broken rows).
--                                     Items must be columns of measure.<entity>_hour; a
--                                     threshold naming anything else is reported as an error.
--   measure.threshold_table / threshold_series / threshold_annotations(system, from, to, ...)
--                                     the threshold dashboard's Figure 1 table, item graphs
--                                     and violation annotations: hourly up to 7 days (as
--                                     threshold_check gives it), else per shift or month and
--                                     shift from _measure.threshold_rollup, resolved when the
--                                     hours are condensed and when thresholds change.
--   measure.terminal_series(system, from, to, shifts, lines)
--                                     TERMINAL counters per terminal and hour, shift or month
--                                     (_measure.terminal_hour / terminal_rollup, kept when the
--                                     hours are condensed).
--   measure.capacity_series(system, from, to, capacity, horizon_days)
--                                     the daily peak-hour busy % per CPU and disc volume,
--                                     its least-squares trend extended horizon_days past
--                                     `to`, the ±15 % band and the capacity line
--                                     (measure.report_capacity_forecast gives the dates).
--
-- Dashboard SQL passes Grafana's $__timeFrom() / $__timeTo() (quoted RFC 3339 literals) as
-- the from/to arguments; no expression ever has to go inside a macro's parentheses.

-- ---------------------------------------------------------------- shifts, tiers, days

-- The shifts in force today (in each system's time zone): the calendar version of today
-- (schema/110-calendar.sql), one row per shift number with its first weekday's times, and its
-- holiday shift (no times); the base shifts (_measure.shift: the system's own, else the
-- defaults) before a system's first version. The full calendar: measure.calendar_shift.
CREATE OR REPLACE VIEW measure.shift AS
WITH cur AS (
    SELECT s.system_id, s.system_name,
           (SELECT c.calendar_id FROM _measure.calendar c
             WHERE c.system_id = s.system_id AND c.effective_from <= (now() AT TIME ZONE s.time_zone)::date
             ORDER BY c.effective_from DESC LIMIT 1) AS calendar_id
      FROM _measure.system s)
SELECT cur.system_name, ss.shift_no, ss.name, ss.begin_time, ss.end_time, ss.crosses_midnight, cur.system_id
  FROM cur JOIN _measure.system_shift ss ON ss.system_id = cur.system_id
 WHERE cur.calendar_id IS NULL
UNION ALL
SELECT x.system_name, x.shift_no, x.name, x.begin_time, x.end_time, x.crosses_midnight, x.system_id
  FROM (SELECT DISTINCT ON (cur.system_id, cs.shift_no) cur.system_name, cs.shift_no, cs.name, cs.begin_time,
               cs.end_time, cs.end_time <= cs.begin_time AS crosses_midnight, cur.system_id
          FROM cur JOIN _measure.calendar_shift cs ON cs.calendar_id = cur.calendar_id
         ORDER BY cur.system_id, cs.shift_no, cs.weekday) x
UNION ALL
SELECT cur.system_name, c.holiday_shift, c.holiday_name, NULL::time, NULL::time, NULL::boolean, cur.system_id
  FROM cur JOIN _measure.calendar c ON c.calendar_id = cur.calendar_id
 WHERE c.holiday_shift IS NOT NULL;
GRANT SELECT ON measure.shift TO measure_writer, measure_api, measure_reader;
COMMENT ON VIEW measure.shift IS
    'Shifts in force today per system (calendar version of today, else its own base shifts, else the defaults): number, name, local [begin, end) (of the first weekday that has it; the holiday shift has none).';

CREATE OR REPLACE FUNCTION measure.dashboard_tier(p_from timestamptz, p_to timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN extract(epoch FROM p_to - p_from) <= 7 * 86400 + 3600 THEN 'hour'
                WHEN extract(epoch FROM p_to - p_from) <= 92 * 86400 THEN 'shift'
                ELSE 'month' END
$$;
GRANT EXECUTE ON FUNCTION measure.dashboard_tier(timestamptz, timestamptz)
    TO measure_writer, measure_api, measure_reader;

CREATE OR REPLACE FUNCTION measure.hour_start(p_at timestamptz)
RETURNS timestamptz LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN date_bin(INTERVAL '1 hour', p_at, TIMESTAMPTZ '2000-01-01 00:00:00+00');
GRANT EXECUTE ON FUNCTION measure.hour_start(timestamptz) TO measure_writer, measure_api, measure_reader;

CREATE OR REPLACE FUNCTION measure.hour_end(p_at timestamptz)
RETURNS timestamptz LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN date_bin(INTERVAL '1 hour', p_at + INTERVAL '1 hour' - INTERVAL '1 microsecond',
                TIMESTAMPTZ '2000-01-01 00:00:00+00');
GRANT EXECUTE ON FUNCTION measure.hour_end(timestamptz) TO measure_writer, measure_api, measure_reader;

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
    subj_e text[];    -- and their expressions over the grouped upper-tier row g (and entity e)
    subj_sel text;
    ret text;
    sel_h text;
    sel_s text;
    sel_m text;
    piv text;
    grp text;
    join_e text;
    with_ct text;
    r record;
BEGIN
    FOREACH ent IN ARRAY _measure.tiered_entities() LOOP
        -- the subject columns as the views measure.<entity>_shift / _month name them
        CASE ent
            WHEN 'cpu', 'tmf' THEN
                subj := ARRAY['cpu']; subj_t := ARRAY['smallint']; subj_e := ARRAY['g.subject::smallint'];
            WHEN 'disc' THEN
                subj := ARRAY['volume']; subj_t := ARRAY['text']; subj_e := ARRAY['g.subject'];
            WHEN 'line' THEN
                subj := ARRAY['line', 'cpu']; subj_t := ARRAY['text', 'smallint'];
                subj_e := ARRAY['e.ids->>''device_name''', 'e.cpu'];
            WHEN 'process' THEN
                subj := ARRAY['cpu', 'pin', 'process_name', 'program_file_name'];
                subj_t := ARRAY['smallint', 'integer', 'text', 'text'];
                subj_e := ARRAY['e.cpu', '(e.ids->>''pin'')::integer', 'e.ids->>''process_name''',
                                'e.ids->>''program_file_name'''];
            WHEN 'userdef' THEN
                subj := ARRAY['cpu', 'pin', 'process_name', 'counter_name', 'counter_index', 'counter_type'];
                subj_t := ARRAY['smallint', 'integer', 'text', 'text', 'integer', 'text'];
                subj_e := ARRAY['e.cpu', '(e.ids->>''pin'')::integer', 'e.ids->>''process_name''',
                                'upper(e.ids->>''name'')', '(e.ids->>''index'')::integer',
                                'coalesce(ct.counter_type, ''ACCUM'')'];
        END CASE;
        join_e := CASE WHEN ent IN ('line', 'process', 'userdef')
                       THEN E'\n              LEFT JOIN _measure.entity e ON e.entity_id = g.subject::bigint' ELSE '' END;
        with_ct := '';
        IF ent = 'userdef' THEN
            -- a user counter's TYPE from the newest CONTAB of the system that names it (ACCUM
            -- when none does), looked up once per call instead of once per row
            join_e := join_e || E'\n              LEFT JOIN ct ON ct.counter_name = upper(e.ids->>''name'')';
            with_ct := $ct$
    WITH ct AS MATERIALIZED (
        SELECT DISTINCT ON (upper(c->>'name')) upper(c->>'name') AS counter_name, c->>'type' AS counter_type
          FROM _measure.measurement m, jsonb_array_elements(coalesce(m.contab->'counters', '[]')) c
         WHERE m.system_id = (SELECT measure.system_id_of(p_system))
         ORDER BY upper(c->>'name'), m.measurement_id DESC)$ct$;
        END IF;
        ret := 'bucket_at timestamptz, tier text, shift_no smallint';
        sel_h := 'h.hour_at, ''hour''::text, ss.shift_no';
        sel_s := 'ss.start_at, ''shift''::text, v.shift_no';
        sel_m := '(v.month + time ''00:00'') AT TIME ZONE s.time_zone, ''month''::text, NULL::smallint';
        grp := 'v.month, s.time_zone';
        subj_sel := '';
        FOR i IN 1 .. array_length(subj, 1) LOOP
            ret := ret || format(', %I %s', subj[i], subj_t[i]);
            sel_h := sel_h || format(', h.%I', subj[i]);
            sel_s := sel_s || format(', v.%I', subj[i]);
            sel_m := sel_m || format(', v.%I', subj[i]);
            grp := grp || format(', v.%I', subj[i]);
            subj_sel := subj_sel || format(', %s AS %I', subj_e[i], subj[i]);
        END LOOP;
        piv := '';
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
            -- this item's columns of the views measure.<entity>_shift / _month (020-tiers.sql)
            piv := piv || format(
                E',\n                   sum(t.wsum) FILTER (WHERE t.item = %1$L) / nullif(sum(t.weight) FILTER (WHERE t.item = %1$L), 0) AS %2$I'
                || E',\n                   max(t.vmax) FILTER (WHERE t.item = %1$L) AS %3$I',
                r.item, r.item || '_avg', r.item || '_max');
        END LOOP;
        EXECUTE format('DROP FUNCTION IF EXISTS measure.%I(text, timestamptz, timestamptz, integer[])',
                       ent || '_series');
        EXECUTE format('DROP FUNCTION IF EXISTS measure.%I(text, timestamptz, timestamptz, integer[], text[])',
                       ent || '_series');
        EXECUTE format($f$
CREATE FUNCTION measure.%1$I(p_system text, p_from timestamptz, p_to timestamptz,
                             p_shifts integer[] DEFAULT NULL, p_items text[] DEFAULT NULL)
RETURNS TABLE (%2$s)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
    SET plan_cache_mode = force_custom_plan AS $body$%10$s
    SELECT %3$s
      FROM measure.%4$I h
      -- the shift of every hour of the range (the calendar: weekday shifts, holidays, versions)
      JOIN _measure.shift_hours((SELECT measure.system_id_of(p_system)), p_from,
                                p_to + INTERVAL '1 microsecond') ss ON ss.hour_at = h.hour_at
     WHERE measure.dashboard_tier(p_from, p_to) = 'hour'
       AND h.system_id = (SELECT measure.system_id_of(p_system))
       AND h.hour_at >= p_from AND h.hour_at <= p_to
       AND (p_shifts IS NULL OR ss.shift_no = ANY (p_shifts))
    UNION ALL
    SELECT %6$s
      FROM (SELECT g.*%13$s   -- names joined to the grouped rows (OFFSET 0: before the shifts)
              FROM (SELECT t.system_id, t.subject, t.shift_day, t.shift_no%7$s
                      FROM _measure.tier_shift t
                     WHERE measure.dashboard_tier(p_from, p_to) = 'shift' AND t.entity = %11$L
                       AND t.system_id = (SELECT measure.system_id_of(p_system))
                       AND t.shift_day >= (p_from - INTERVAL '2 days')::date
                       AND t.shift_day <= (p_to + INTERVAL '1 day')::date
                       AND (p_shifts IS NULL OR t.shift_no = ANY (p_shifts))
                       AND (p_items IS NULL OR t.item = ANY (p_items))
                     GROUP BY t.system_id, t.subject, t.shift_day, t.shift_no) g%9$s
             OFFSET 0) v
      JOIN _measure.shifts_between((SELECT measure.system_id_of(p_system)), p_from - INTERVAL '2 days',
                                   p_to + INTERVAL '2 days') ss ON ss.shift_day = v.shift_day AND ss.shift_no = v.shift_no
     WHERE measure.dashboard_tier(p_from, p_to) = 'shift'
       AND ss.start_at >= p_from AND ss.start_at <= p_to
    UNION ALL
    SELECT %8$s
      FROM (SELECT g.*%13$s
              FROM (SELECT t.system_id, t.subject, t.month, t.shift_no, max(t.shift_hours) AS shift_hours,
                           max(t.elapsed_us) / (max(t.shift_hours) * 3.6e9) AS coverage_ratio%7$s
                      FROM _measure.tier_month t
                     WHERE measure.dashboard_tier(p_from, p_to) = 'month' AND t.entity = %11$L
                       AND t.system_id = (SELECT measure.system_id_of(p_system))
                       AND t.month >= (p_from - INTERVAL '32 days')::date AND t.month <= (p_to + INTERVAL '1 day')::date
                       AND (p_shifts IS NULL OR t.shift_no = ANY (p_shifts))
                       AND (p_items IS NULL OR t.item = ANY (p_items))
                     GROUP BY t.system_id, t.subject, t.month, t.shift_no) g%9$s
             OFFSET 0) v
      JOIN _measure.system s ON s.system_id = v.system_id
     WHERE (v.month + time '00:00') AT TIME ZONE s.time_zone < p_to
       AND ((v.month + INTERVAL '1 month') + time '00:00') AT TIME ZONE s.time_zone > p_from
     GROUP BY %12$s
     ORDER BY 1, 4
$body$$f$,
            ent || '_series', ret, sel_h, ent || '_hour', NULL, sel_s, piv, sel_m, join_e, with_ct, ent, grp,
            subj_sel);
        EXECUTE format('REVOKE ALL ON FUNCTION measure.%I(text, timestamptz, timestamptz, integer[], text[]) FROM PUBLIC',
                       ent || '_series');
        EXECUTE format('GRANT EXECUTE ON FUNCTION measure.%I(text, timestamptz, timestamptz, integer[], text[]) '
                       'TO measure_writer, measure_api, measure_reader', ent || '_series');
        EXECUTE format('COMMENT ON FUNCTION measure.%I(text, timestamptz, timestamptz, integer[], text[]) IS %L',
                       ent || '_series',
                       upper(ent) || ' items of the tier that fits [from, to] (measure.dashboard_tier): '
                       || '<item>_avg and <item>_max per bucket; shifts NULL = all; items: only those are '
                       || 'read on the shift and month tiers (the others NULL there), NULL = all.');
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

-- The subject of a threshold row, as an expression over the hour view `v`: the CPU number,
-- volume, line, "cpu pin process" or "process counter index" (measure.report_threshold_items).
CREATE OR REPLACE FUNCTION _measure.threshold_subject(p_entity text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'concat_ws('' '', '
           || CASE p_entity WHEN 'cpu' THEN 'v.cpu' WHEN 'tmf' THEN 'v.cpu' WHEN 'disc' THEN 'v.volume'
                            WHEN 'line' THEN 'v.line'
                            WHEN 'process' THEN 'v.cpu, v.pin, v.process_name'
                            ELSE 'v.process_name, v.counter_name, v.counter_index' END
           || ')'
$$;
GRANT EXECUTE ON FUNCTION _measure.threshold_subject(text) TO measure_writer;

-- The query that evaluates those items on the hour rows: parameters $1 system (NULL: all),
-- $2/$3 the range of hour_at, $4 only the broken rows (when true), $5 only these hours
-- (NULL: all of the range). Columns as measure.threshold_check returns them. Each hour is
-- evaluated against the thresholds of its shift (_measure.threshold_by_shift; hours in no
-- shift are not evaluated). p_store: unordered.
DROP FUNCTION IF EXISTS _measure.threshold_query(text, text);
CREATE OR REPLACE FUNCTION _measure.threshold_query(p_entity text, p_items text, p_store boolean DEFAULT false)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format($q$
        SELECT v.system_name, %1$L::text, %2$s, v.hour_at, ss.shift_no,
               x.item, x.value, t.operator, t.limit_value,
               coalesce(measure.breaks(x.value, t.operator, t.limit_value), false)
          FROM measure.%3$I v
          JOIN _measure.shift_hours($1, $2, $3 + INTERVAL '1 microsecond') ss
            ON ss.system_id = v.system_id AND ss.hour_at = v.hour_at
         CROSS JOIN LATERAL (VALUES %4$s) x (item, value)
          JOIN _measure.threshold_by_shift t ON t.system_id = v.system_id AND t.shift_no = ss.shift_no
           AND t.entity = %1$L AND t.item = x.item
         WHERE ($1 IS NULL OR v.system_id = $1) AND v.hour_at >= $2 AND v.hour_at <= $3
           AND ($4 IS NOT TRUE OR measure.breaks(x.value, t.operator, t.limit_value))
           AND ($5 IS NULL OR v.hour_at = ANY ($5))%5$s$q$,
        p_entity, _measure.threshold_subject(p_entity), p_entity || '_hour', p_items,
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
    IF p_entity IS NOT NULL AND p_entity <> ALL (_measure.tiered_entities()) THEN
        RAISE EXCEPTION 'unknown entity %', p_entity USING ERRCODE = 'invalid_parameter_value',
              HINT = 'entity: one of ' || array_to_string(_measure.tiered_entities(), ', ');
    END IF;
    IF p_broken AND v_sys IS NOT NULL
       AND EXISTS (SELECT 1 FROM _measure.breach_state b WHERE b.system_id = v_sys) THEN
        RETURN QUERY
        SELECT s.system_name, b.entity, b.subject, b.hour_at, ss.shift_no, b.item, b.value,
               b.operator, b.limit_value, true
          FROM _measure.hour_breach b
          JOIN _measure.system s ON s.system_id = b.system_id
          JOIN _measure.shift_hours(v_sys, p_from, p_to + INTERVAL '1 microsecond') ss ON ss.hour_at = b.hour_at
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

-- ---------------------------------------------------------------- thresholds resolved at condense time
--
-- _measure.hour_breach (050-read-paths.sql) holds the rows of every hour that break a
-- threshold in force; _measure.threshold_rollup (060-dashboard-rollups.sql) the threshold
-- items per subject, shift and month: extremes, hours, and hours broken. Both are computed
-- from one evaluation of the items on the hour views, per affected shift:
--
--   condensing (_measure.condense_breaches, from _measure.condense_upper): every shift that
--       contains a condensed hour, then the months of those shifts;
--   a threshold edit (trigger on _measure.threshold, in the editing transaction): every
--       hour of the entity types whose thresholds changed, for every system whose stored
--       rows are complete (_measure.breach_state) — nothing stale is ever read;
--   an incomplete system (first condensing after an upgrade or a changed hour view): all
--       of its hours, in batches of 90 shifts.
--
-- Thresholds that cannot be evaluated (an item that is no column) leave the system
-- incomplete: readers evaluate the hours themselves and report that error.
-- Condensing takes a shared advisory lock (so condensers do not wait for each other) and a
-- threshold edit an exclusive one: a condensing that started before the edit commits
-- before the edit re-evaluates, and one that starts after it sees the new thresholds.

-- (_measure.shifts_between, every shift of a system that overlaps a range: 020-tiers.sql, with
-- the calendar it reads.)

-- Evaluate the threshold items of one system on every hour of the shifts in the temporary
-- table _thr_shift (filled by the caller), only of the entity types p_entities (NULL: all),
-- and replace their _measure.hour_breach rows and shift rows of _measure.threshold_rollup,
-- then (p_months) the month rows of the months of those shifts (_measure.threshold_months;
-- condensing leaves them to _measure.condense_months). Raises invalid_parameter_value when a
-- threshold names no column (the caller decides).
DROP FUNCTION IF EXISTS _measure.threshold_resolve(smallint, text[]);
CREATE OR REPLACE FUNCTION _measure.threshold_resolve(p_system smallint, p_entities text[] DEFAULT NULL,
                                                      p_months boolean DEFAULT true)
RETURNS void LANGUAGE plpgsql SET work_mem = '256MB' AS $$
DECLARE
    v_lo timestamptz;
    v_hi timestamptz;
    v_hours timestamptz[];
    v_ent text;
    v_items text;
BEGIN
    SELECT min(start_at), max(end_at) INTO v_lo, v_hi FROM _thr_shift;
    IF v_lo IS NULL THEN
        RETURN;
    END IF;
    IF to_regclass('pg_temp._thr_rule') IS NULL THEN  -- (IF NOT EXISTS would NOTICE on every call)
        CREATE TEMP TABLE _thr_rule (entity text, item text, operator text, limit_value numeric,
                                     shift_no smallint) ON COMMIT DROP;
    END IF;
    IF to_regclass('pg_temp._thr_val') IS NULL THEN  -- (IF NOT EXISTS would NOTICE on every call)
        CREATE TEMP TABLE _thr_val (entity text, subject text, hour_at timestamptz, item text,
                                    value numeric, broken boolean, shift_no smallint) ON COMMIT DROP;
    END IF;
    IF to_regclass('pg_temp._thr_hour') IS NULL THEN  -- (IF NOT EXISTS would NOTICE on every call)
        CREATE TEMP TABLE _thr_hour (shift_day date, shift_no smallint, start_at timestamptz,
                                     end_at timestamptz, hour_at timestamptz) ON COMMIT DROP;
    END IF;
    TRUNCATE _thr_rule, _thr_val, _thr_hour;
    -- every UTC hour start inside each shift
    INSERT INTO _thr_hour
    SELECT a.shift_day, a.shift_no, a.start_at, a.end_at, h
      FROM _thr_shift a
     CROSS JOIN LATERAL generate_series(
           date_bin(INTERVAL '1 hour', a.start_at + INTERVAL '1 hour' - INTERVAL '1 microsecond',
                    TIMESTAMPTZ '2000-01-01 00:00:00+00'),
           a.end_at - INTERVAL '1 microsecond', INTERVAL '1 hour') h;
    v_hours := ARRAY(SELECT DISTINCT hour_at FROM _thr_hour);
    -- the thresholds that hold for the hours of each of those shift numbers
    INSERT INTO _thr_rule
    SELECT t.entity, t.item, t.operator, t.limit_value, t.shift_no FROM _measure.threshold_by_shift t
     WHERE t.system_id = p_system AND (p_entities IS NULL OR t.entity = ANY (p_entities))
       AND t.shift_no IN (SELECT DISTINCT shift_no FROM _thr_hour);
    FOR v_ent IN SELECT DISTINCT entity FROM _thr_rule ORDER BY 1 LOOP
        v_items := _measure.threshold_items(p_system, v_ent, NULL);
        CONTINUE WHEN v_items IS NULL;
        EXECUTE format($q$
            INSERT INTO _thr_val
            SELECT %1$L, %2$s, v.hour_at, x.item, x.value,
                   coalesce((SELECT bool_or(measure.breaks(x.value, r.operator, r.limit_value))
                               FROM _thr_rule r WHERE r.entity = %1$L AND r.item = x.item
                                AND r.shift_no = a.shift_no), false),
                   a.shift_no
              FROM measure.%3$I v
              JOIN _thr_hour a ON a.hour_at = v.hour_at
             CROSS JOIN LATERAL (VALUES %4$s) x (item, value)
             WHERE v.system_id = $1 AND v.hour_at >= $2 AND v.hour_at < $3 AND v.hour_at = ANY ($4)$q$,
            v_ent, _measure.threshold_subject(v_ent), v_ent || '_hour', v_items)
        USING p_system, v_lo, v_hi, v_hours;
    END LOOP;

    DELETE FROM _measure.hour_breach b
     WHERE b.system_id = p_system AND b.hour_at >= v_lo AND b.hour_at < v_hi AND b.hour_at = ANY (v_hours)
       AND (p_entities IS NULL OR b.entity = ANY (p_entities));
    INSERT INTO _measure.hour_breach (system_id, entity, subject, hour_at, item, value, operator, limit_value)
    SELECT p_system, v.entity, v.subject, v.hour_at, v.item, v.value, r.operator, r.limit_value
      FROM _thr_val v JOIN _thr_rule r ON r.entity = v.entity AND r.item = v.item AND r.shift_no = v.shift_no
     WHERE v.broken AND measure.breaks(v.value, r.operator, r.limit_value);

    DELETE FROM _measure.threshold_rollup t USING _thr_shift a
     WHERE t.system_id = p_system AND t.grain = 'shift'
       AND t.start_at >= a.start_at AND t.start_at < a.end_at
       AND (p_entities IS NULL OR t.entity = ANY (p_entities));
    INSERT INTO _measure.threshold_rollup (system_id, grain, entity, item, start_at, shift_no, subject, end_at,
                                           bucket, hours, vmax, vmin, broken_hours, rules, low)
    SELECT p_system, 'shift', v.entity, v.item, a.start_at, a.shift_no, v.subject, a.end_at, a.shift_day,
           count(v.value), max(v.value), min(v.value), count(*) FILTER (WHERE v.broken), r.rules, r.low
      FROM _thr_val v
      JOIN _thr_hour a ON a.hour_at = v.hour_at
      JOIN (SELECT entity, item, shift_no,
                   string_agg(operator || ' ' || limit_value, ', ' ORDER BY operator) AS rules,
                   bool_and(operator IN ('<', '<=')) AS low
              FROM _thr_rule GROUP BY entity, item, shift_no) r
        ON r.entity = v.entity AND r.item = v.item AND r.shift_no = a.shift_no
     GROUP BY v.entity, v.item, v.subject, a.start_at, a.shift_no, a.end_at, a.shift_day, r.rules, r.low
    UNION ALL
    -- '*': the hours of the subject that broke any of its thresholds
    SELECT p_system, 'shift', y.entity, '*', a.start_at, a.shift_no, y.subject, a.end_at, a.shift_day,
           count(*), NULL, NULL, count(*) FILTER (WHERE y.broken), NULL, false
      FROM (SELECT entity, subject, hour_at, bool_or(broken) AS broken
              FROM _thr_val GROUP BY entity, subject, hour_at) y
      JOIN _thr_hour a ON a.hour_at = y.hour_at
     GROUP BY y.entity, y.subject, a.start_at, a.shift_no, a.end_at, a.shift_day;

    -- the months of those shifts (only the rows of their shift numbers), from their shift rows
    IF p_months THEN
        PERFORM _measure.threshold_months(p_system, ARRAY(SELECT DISTINCT date_trunc('month', shift_day)::date FROM _thr_shift),
                                          ARRAY(SELECT DISTINCT shift_no FROM _thr_shift), p_entities);
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.threshold_resolve(smallint, text[], boolean) TO measure_writer;

-- The month rows of _measure.threshold_rollup of the given local months and shift numbers,
-- from their shift rows (only of the entity types p_entities; NULL: all).
CREATE OR REPLACE FUNCTION _measure.threshold_months(p_system smallint, p_months date[], p_nos smallint[],
                                                     p_entities text[] DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET work_mem = '256MB' AS $$
DECLARE
    v_tz text := (SELECT time_zone FROM _measure.system WHERE system_id = p_system);
BEGIN
    IF cardinality(p_months) = 0 THEN
        RETURN;
    END IF;
    DELETE FROM _measure.threshold_rollup t
     WHERE t.system_id = p_system AND t.grain = 'month' AND t.bucket = ANY (p_months)
       AND t.shift_no = ANY (p_nos)
       AND (p_entities IS NULL OR t.entity = ANY (p_entities));
    INSERT INTO _measure.threshold_rollup (system_id, grain, entity, item, start_at, shift_no, subject, end_at,
                                           bucket, hours, vmax, vmin, broken_hours, rules, low)
    SELECT p_system, 'month', t.entity, t.item, (m.month + time '00:00') AT TIME ZONE v_tz, t.shift_no, t.subject,
           ((m.month + INTERVAL '1 month')::date + time '00:00') AT TIME ZONE v_tz, m.month,
           sum(t.hours), max(t.vmax), min(t.vmin), sum(t.broken_hours), max(t.rules), bool_and(t.low)
      FROM _measure.threshold_rollup t
     CROSS JOIN LATERAL (SELECT date_trunc('month', t.bucket)::date AS month) m
     WHERE t.system_id = p_system AND t.grain = 'shift'
       AND t.start_at >= ((SELECT min(x) FROM unnest(p_months) x) - 1 + time '00:00') AT TIME ZONE v_tz
       AND t.start_at < ((SELECT max(x) FROM unnest(p_months) x) + INTERVAL '1 month' + INTERVAL '1 day')
                        AT TIME ZONE v_tz
       AND m.month = ANY (p_months) AND t.shift_no = ANY (p_nos)
       AND (p_entities IS NULL OR t.entity = ANY (p_entities))
     GROUP BY t.entity, t.item, m.month, t.shift_no, t.subject;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.threshold_months(smallint, date[], smallint[], text[]) TO measure_writer;

-- Resolve every hour of one system (all entity types, or only p_entities), 90 shifts at a
-- time. Returns false, leaving the system incomplete (no _measure.breach_state row), when a
-- threshold cannot be evaluated; true otherwise.
CREATE OR REPLACE FUNCTION _measure.threshold_rebuild(p_system smallint, p_entities text[] DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_first timestamptz;
    v_last timestamptz;
    v_starts timestamptz[];
    i integer;
BEGIN
    SELECT min(lo), max(hi) INTO v_first, v_last
      FROM (SELECT min(hour_at) AS lo, max(hour_at) AS hi FROM _measure.cpu_hour WHERE system_id = p_system
            UNION ALL SELECT min(hour_at), max(hour_at) FROM _measure.disc_hour WHERE system_id = p_system
            UNION ALL SELECT min(hour_at), max(hour_at) FROM _measure.line_hour WHERE system_id = p_system
            UNION ALL SELECT min(hour_at), max(hour_at) FROM _measure.process_hour WHERE system_id = p_system
            UNION ALL SELECT min(hour_at), max(hour_at) FROM _measure.userdef_hour WHERE system_id = p_system
            UNION ALL SELECT min(hour_at), max(hour_at) FROM _measure.tmf_hour WHERE system_id = p_system) x;
    IF to_regclass('pg_temp._thr_shift') IS NULL THEN  -- (IF NOT EXISTS would NOTICE on every call)
        CREATE TEMP TABLE _thr_shift (shift_day date, shift_no smallint, start_at timestamptz,
                                      end_at timestamptz) ON COMMIT DROP;
    END IF;
    BEGIN
        -- whatever was stored for the system (or those entity types), also outside the hours now measured
        DELETE FROM _measure.hour_breach
         WHERE system_id = p_system AND (p_entities IS NULL OR entity = ANY (p_entities));
        DELETE FROM _measure.threshold_rollup
         WHERE system_id = p_system AND (p_entities IS NULL OR entity = ANY (p_entities));
        IF v_first IS NOT NULL THEN
            v_starts := ARRAY(SELECT s.start_at FROM _measure.shifts_between(p_system, v_first,
                                                                              v_last + INTERVAL '1 hour') s
                               ORDER BY 1);
            i := 1;
            WHILE i <= cardinality(v_starts) LOOP
                TRUNCATE _thr_shift;
                INSERT INTO _thr_shift
                SELECT s.* FROM _measure.shifts_between(p_system, v_starts[i],
                                                        coalesce(v_starts[i + 90], v_last + INTERVAL '1 hour')) s
                 WHERE s.start_at >= v_starts[i] AND (v_starts[i + 90] IS NULL OR s.start_at < v_starts[i + 90]);
                PERFORM _measure.threshold_resolve(p_system, p_entities);
                i := i + 90;
            END LOOP;
        END IF;
        INSERT INTO _measure.breach_state (system_id) VALUES (p_system) ON CONFLICT (system_id) DO NOTHING;
        IF p_entities IS NULL OR 'cpu' = ANY (p_entities) THEN
            -- the Figure 1 lines of every hour (_measure.threshold_line, 020-tiers.sql)
            PERFORM _measure.condense_threshold_lines(p_system, NULL);
        END IF;
        RETURN true;
    EXCEPTION WHEN invalid_parameter_value THEN
        DELETE FROM _measure.breach_state WHERE system_id = p_system;
        RETURN false;
    END;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.threshold_rebuild(smallint, text[]) TO measure_writer;

-- Systems whose stored violations an upgrade left to rebuild (schema/170-threshold-shifts.sql:
-- thresholds per shift, the most specific row first): rebuilt once, here, after the functions.
DO $pending$
DECLARE
    v_sys smallint;
BEGIN
    FOR v_sys IN SELECT p.system_id FROM _measure.threshold_rebuild_pending p
                   JOIN _measure.system s ON s.system_id = p.system_id ORDER BY 1 LOOP
        PERFORM _measure.threshold_rebuild(v_sys);
    END LOOP;
    DELETE FROM _measure.threshold_rebuild_pending;
END
$pending$;

-- Keep the stored violations, threshold rollups and threshold report lines of one system (called by
-- _measure.condense_upper after the hour tiers and _measure.hour_shadow of p_hours are
-- current): the shifts that contain p_hours when the system is complete, else all of its
-- hours (first condensing after a definition change, or after a threshold that could not be
-- evaluated).
CREATE OR REPLACE FUNCTION _measure.condense_breaches(p_system smallint, p_hours timestamptz[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1296385364);  -- 'MEBT'; threshold edits take it exclusively
    IF NOT EXISTS (SELECT 1 FROM _measure.breach_state WHERE system_id = p_system) THEN
        PERFORM _measure.threshold_rebuild(p_system);
        RETURN;
    END IF;
    IF to_regclass('pg_temp._thr_shift') IS NULL THEN  -- (IF NOT EXISTS would NOTICE on every call)
        CREATE TEMP TABLE _thr_shift (shift_day date, shift_no smallint, start_at timestamptz,
                                      end_at timestamptz) ON COMMIT DROP;
    END IF;
    TRUNCATE _thr_shift;
    INSERT INTO _thr_shift SELECT s.* FROM _measure.shifts_of_hours(p_system, p_hours) s;
    BEGIN
        PERFORM _measure.threshold_resolve(p_system, NULL, false);  -- months: _measure.condense_months
        PERFORM _measure.condense_threshold_lines(p_system, p_hours);
    EXCEPTION WHEN invalid_parameter_value THEN
        DELETE FROM _measure.breach_state WHERE system_id = p_system;
    END;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.condense_breaches(smallint, timestamptz[]) TO measure_writer;

-- A change of the thresholds re-resolves, in the same transaction, every hour of the entity
-- types it touches, for every complete system it applies to (a default row: every system).
-- TRUNCATE leaves no threshold in force: nothing breaks.
CREATE OR REPLACE FUNCTION _measure.threshold_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
BEGIN
    PERFORM pg_advisory_xact_lock(1296385364);
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM _measure.hour_breach;
        DELETE FROM _measure.threshold_rollup;
        DELETE FROM _measure.threshold_line;
        RETURN NULL;
    END IF;
    IF to_regclass('pg_temp._thr_changed') IS NULL THEN  -- (IF NOT EXISTS would NOTICE on every call)
        CREATE TEMP TABLE _thr_changed (system_id smallint, entity text) ON COMMIT DROP;
    END IF;
    TRUNCATE _thr_changed;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO _thr_changed SELECT n.system_id, n.entity FROM thr_new n;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO _thr_changed SELECT o.system_id, o.entity FROM thr_old o;
    END IF;
    FOR r IN SELECT b.system_id, array_agg(DISTINCT c.entity ORDER BY c.entity) AS entities
               FROM _thr_changed c
               JOIN _measure.breach_state b ON c.system_id IS NULL OR c.system_id = b.system_id
              GROUP BY b.system_id ORDER BY b.system_id LOOP
        PERFORM _measure.threshold_rebuild(r.system_id, r.entities);
    END LOOP;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS threshold_changed ON _measure.threshold;
DROP TRIGGER IF EXISTS threshold_inserted ON _measure.threshold;
DROP TRIGGER IF EXISTS threshold_updated ON _measure.threshold;
DROP TRIGGER IF EXISTS threshold_deleted ON _measure.threshold;
DROP TRIGGER IF EXISTS threshold_truncated ON _measure.threshold;
CREATE TRIGGER threshold_inserted AFTER INSERT ON _measure.threshold
    REFERENCING NEW TABLE AS thr_new FOR EACH STATEMENT EXECUTE FUNCTION _measure.threshold_changed();
CREATE TRIGGER threshold_updated AFTER UPDATE ON _measure.threshold
    REFERENCING OLD TABLE AS thr_old NEW TABLE AS thr_new
    FOR EACH STATEMENT EXECUTE FUNCTION _measure.threshold_changed();
CREATE TRIGGER threshold_deleted AFTER DELETE ON _measure.threshold
    REFERENCING OLD TABLE AS thr_old FOR EACH STATEMENT EXECUTE FUNCTION _measure.threshold_changed();
CREATE TRIGGER threshold_truncated AFTER TRUNCATE ON _measure.threshold
    FOR EACH STATEMENT EXECUTE FUNCTION _measure.threshold_changed();

-- ... and a change of the hour views the items are columns of, or of the evaluation (a new
-- release), makes every system incomplete: the next condensing resolves all of its hours.
DO $basis$
DECLARE
    v_fp text := md5(concat_ws('|', 'rollup 1',
                               pg_get_viewdef('measure.cpu_hour'::regclass),
                               pg_get_viewdef('measure.disc_hour'::regclass),
                               pg_get_viewdef('measure.line_hour'::regclass),
                               pg_get_viewdef('measure.process_hour'::regclass),
                               pg_get_viewdef('measure.userdef_hour'::regclass),
                               pg_get_viewdef('measure.tmf_hour'::regclass),
                               pg_get_functiondef('_measure.threshold_subject(text)'::regprocedure),
                               pg_get_functiondef('_measure.threshold_resolve(smallint, text[], boolean)'::regprocedure)));
BEGIN
    IF v_fp IS DISTINCT FROM (SELECT fingerprint FROM _measure.breach_basis) THEN
        DELETE FROM _measure.breach_state;
        INSERT INTO _measure.breach_basis (fingerprint) VALUES (v_fp)
            ON CONFLICT (one) DO UPDATE SET fingerprint = excluded.fingerprint;
    END IF;
END
$basis$;

-- ---------------------------------------------------------------- threshold panels
-- What the threshold dashboard reads. Up to 7 days (measure.dashboard_tier = 'hour') every
-- hour, exactly as measure.threshold_check gives it; past that, one row per shift (up to
-- 92 days) or per month and shift, from _measure.threshold_rollup (a year of a 16-CPU node
-- in tens of milliseconds).

-- Figure 1 as a table: the CPU hours of [from, to] that break at least one CPU threshold,
-- with the Figure 1 items (hours = 1); past 7 days one row per CPU and shift (or month and
-- shift) with at least one breaking hour: hours = hours that broke any CPU threshold, the
-- threshold items' largest (lower limits: smallest) hourly value in the bucket, the AVG
-- columns NULL, and `broken` = each broken item with its limits and hours.
CREATE OR REPLACE FUNCTION measure.threshold_table(p_system text, p_from timestamptz, p_to timestamptz,
                                                   p_shifts integer[] DEFAULT NULL, p_cpus text[] DEFAULT NULL)
RETURNS TABLE (bucket_at timestamptz, tier text, cpu smallint, time_of_day text, shift_no smallint,
               hours integer, qlen_max numeric, qlen_delt numeric, swap_max numeric, busy_max numeric,
               busy_delt numeric, ibusy_max numeric, qlen_avg numeric, swap_avg numeric, busy_avg numeric,
               ibusy_avg numeric, broken text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
    SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_sys smallint := measure.system_id_of(p_system);
    v_tier text := measure.dashboard_tier(p_from, p_to);
BEGIN
    IF v_tier = 'hour' OR NOT EXISTS (SELECT 1 FROM _measure.breach_state b WHERE b.system_id = v_sys) THEN
        RETURN QUERY
        SELECT h.hour_at, 'hour'::text, h.cpu, to_char(h.local_hour, 'YYYY-MM-DD HH24:MI'), b.shift_no, 1,
               h.qlen_max, h.qlen_delt, h.swap_max, h.busy_max, h.busy_delt, h.ibusy_max,
               h.qlen_avg, h.swap_avg, h.busy_avg, h.ibusy_avg, b.broken
          FROM (SELECT c.hour_at, c.subject, min(c.shift_no) AS shift_no,
                       string_agg(c.item || ' ' || c.operator || ' ' || c.limit_value, ', ' ORDER BY c.item) AS broken
                  FROM measure.threshold_check(p_system, p_from, p_to, 'cpu', NULL, true) c
                 WHERE c.broken AND (p_shifts IS NULL OR c.shift_no = ANY (p_shifts))
                   AND (p_cpus IS NULL OR c.subject = ANY (p_cpus))
                 GROUP BY c.hour_at, c.subject) b
          JOIN measure.cpu_hour h ON h.system_id = v_sys AND h.hour_at = b.hour_at AND h.cpu::text = b.subject
         ORDER BY h.cpu, h.hour_at;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT a.start_at, v_tier, a.subject::smallint,
           CASE v_tier WHEN 'shift' THEN to_char(a.bucket, 'YYYY-MM-DD') || ' ' || coalesce(ss.name, '')
                       ELSE to_char(a.bucket, 'YYYY-MM') || ' ' || coalesce(ss.name, '') END,
           a.shift_no, a.broken_hours,
           max(CASE WHEN r.low THEN r.vmin ELSE r.vmax END) FILTER (WHERE r.item = 'qlen_max'),
           max(CASE WHEN r.low THEN r.vmin ELSE r.vmax END) FILTER (WHERE r.item = 'qlen_delt'),
           max(CASE WHEN r.low THEN r.vmin ELSE r.vmax END) FILTER (WHERE r.item = 'swap_max'),
           max(CASE WHEN r.low THEN r.vmin ELSE r.vmax END) FILTER (WHERE r.item = 'busy_max'),
           max(CASE WHEN r.low THEN r.vmin ELSE r.vmax END) FILTER (WHERE r.item = 'busy_delt'),
           max(CASE WHEN r.low THEN r.vmin ELSE r.vmax END) FILTER (WHERE r.item = 'ibusy_max'),
           NULL::numeric, NULL::numeric, NULL::numeric, NULL::numeric,
           string_agg(r.item || ' ' || r.rules || ' (' || r.broken_hours || ' h)', ', ' ORDER BY r.item)
               FILTER (WHERE r.broken_hours > 0)
      FROM _measure.threshold_rollup a
      LEFT JOIN _measure.shift_name ss ON ss.system_id = a.system_id AND ss.shift_no = a.shift_no
      JOIN _measure.threshold_rollup r
        ON r.system_id = a.system_id AND r.grain = a.grain AND r.entity = 'cpu' AND r.item <> '*'
       AND r.start_at = a.start_at AND r.shift_no = a.shift_no AND r.subject = a.subject
       AND r.start_at <= p_to AND r.start_at >= CASE WHEN v_tier = 'month' THEN p_from - INTERVAL '32 days' ELSE p_from END
     WHERE a.system_id = v_sys AND a.grain = v_tier AND a.entity = 'cpu' AND a.item = '*'
       AND a.broken_hours > 0
       AND a.start_at <= p_to AND a.start_at >= CASE WHEN v_tier = 'month' THEN p_from - INTERVAL '32 days' ELSE p_from END
       AND (v_tier = 'shift' OR (a.start_at < p_to AND a.end_at > p_from))
       AND (p_shifts IS NULL OR a.shift_no = ANY (p_shifts))
       AND (p_cpus IS NULL OR a.subject = ANY (p_cpus))
     GROUP BY a.start_at, a.bucket, a.subject, a.shift_no, ss.name, a.broken_hours
     ORDER BY 3, 1, 5;
END
$$;
REVOKE ALL ON FUNCTION measure.threshold_table(text, timestamptz, timestamptz, integer[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.threshold_table(text, timestamptz, timestamptz, integer[], text[])
    TO measure_writer, measure_api, measure_reader;
COMMENT ON FUNCTION measure.threshold_table(text, timestamptz, timestamptz, integer[], text[]) IS
    'Figure 1: breaking CPU hours (up to 7 days), else CPU shifts or months with breaking hours (threshold_rollup).';

-- One threshold item of one entity type as a time series, with the limits in force: per
-- bucket and subject the item's value, one row per threshold on the item (operator,
-- limit_value). Up to 7 days the hourly values (measure.threshold_check); past that the
-- largest (lower limits: smallest) hourly value per shift or per month and shift. Subjects:
-- p_subjects (NULL: all), and of those the p_top with the largest (smallest) value over the
-- range (NULL: all; ties: subject order).
CREATE OR REPLACE FUNCTION measure.threshold_series(p_system text, p_from timestamptz, p_to timestamptz,
                                                    p_entity text, p_item text, p_shifts integer[] DEFAULT NULL,
                                                    p_subjects text[] DEFAULT NULL, p_top integer DEFAULT NULL)
RETURNS TABLE (bucket_at timestamptz, tier text, shift_no smallint, subject text, value numeric,
               operator text, limit_value numeric)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
    SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_sys smallint := measure.system_id_of(p_system);
    v_tier text := measure.dashboard_tier(p_from, p_to);
BEGIN
    IF v_tier = 'hour' OR NOT EXISTS (SELECT 1 FROM _measure.breach_state b WHERE b.system_id = v_sys) THEN
        RETURN QUERY
        WITH c AS MATERIALIZED (
            SELECT c.hour_at, c.shift_no, c.subject, c.value, c.operator, c.limit_value
              FROM measure.threshold_check(p_system, p_from, p_to, p_entity, p_item) c
             WHERE (p_shifts IS NULL OR c.shift_no = ANY (p_shifts))
               AND (p_subjects IS NULL OR c.subject = ANY (p_subjects))),
        top AS (
            SELECT x.subject FROM c x GROUP BY x.subject
             ORDER BY CASE WHEN bool_and(x.operator IN ('<', '<=')) THEN -min(x.value) ELSE max(x.value) END
                      DESC NULLS LAST, x.subject
             LIMIT p_top)
        SELECT c.hour_at, 'hour'::text, c.shift_no, c.subject, c.value, c.operator, c.limit_value
          FROM c WHERE p_top IS NULL OR c.subject IN (SELECT top.subject FROM top)
         ORDER BY 1, 4, 6;
        RETURN;
    END IF;
    RETURN QUERY
    WITH r AS MATERIALIZED (
        SELECT r.start_at, r.shift_no, r.subject, r.vmax, r.vmin
          FROM _measure.threshold_rollup r
         WHERE r.system_id = v_sys AND r.grain = v_tier AND r.entity = p_entity AND r.item = p_item
           AND r.start_at <= p_to AND r.start_at >= CASE WHEN v_tier = 'month' THEN p_from - INTERVAL '32 days' ELSE p_from END
               AND (v_tier = 'shift' OR (r.start_at < p_to AND r.end_at > p_from))
           AND (p_shifts IS NULL OR r.shift_no = ANY (p_shifts))
           AND (p_subjects IS NULL OR r.subject = ANY (p_subjects))),
    t AS (SELECT t.shift_no, t.operator, t.limit_value FROM _measure.threshold_by_shift t
           WHERE t.system_id = v_sys AND t.entity = p_entity AND t.item = p_item),
    low AS (SELECT coalesce(bool_and(t.operator IN ('<', '<=')), false) AS low FROM t),
    top AS (
        SELECT x.subject FROM r x, low GROUP BY x.subject, low.low
         ORDER BY CASE WHEN low.low THEN -min(x.vmin) ELSE max(x.vmax) END DESC NULLS LAST, x.subject
         LIMIT p_top)
    SELECT r.start_at, v_tier, r.shift_no, r.subject,
           CASE WHEN t.operator IN ('<', '<=') THEN r.vmin ELSE r.vmax END, t.operator, t.limit_value
      FROM r JOIN t ON t.shift_no = r.shift_no
     WHERE p_top IS NULL OR r.subject IN (SELECT top.subject FROM top)
     ORDER BY 1, 4, 6;
END
$$;
REVOKE ALL ON FUNCTION measure.threshold_series(text, timestamptz, timestamptz, text, text, integer[], text[], integer)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.threshold_series(text, timestamptz, timestamptz, text, text, integer[], text[], integer)
    TO measure_writer, measure_api, measure_reader;
COMMENT ON FUNCTION measure.threshold_series(text, timestamptz, timestamptz, text, text, integer[], text[], integer) IS
    'One threshold item per bucket and subject with its limits: hourly up to 7 days, else per shift or month (threshold_rollup).';

-- The violations as Grafana annotations (time, timeend, text, tags). Up to 7 days one per
-- hour and subject that breaks a threshold: "cpu 3: busy_max 82.4 > 70, qlen_max 3.1 > 2";
-- past that one per shift (or month) and entity type: each broken item with its limits, the
-- hours it broke, how many subjects broke it and the one that broke it most:
-- "cpu: busy_max > 70 12 h, 2 subjects, most 3 (7 h); qlen_max > 2 4 h, 1 subject, most 3 (4 h)".
CREATE OR REPLACE FUNCTION measure.threshold_annotations(p_system text, p_from timestamptz, p_to timestamptz,
                                                         p_shifts integer[] DEFAULT NULL)
RETURNS TABLE ("time" timestamptz, timeend timestamptz, text text, tags text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
    SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_sys smallint := measure.system_id_of(p_system);
    v_tier text := measure.dashboard_tier(p_from, p_to);
BEGIN
    IF v_tier = 'hour' OR NOT EXISTS (SELECT 1 FROM _measure.breach_state b WHERE b.system_id = v_sys) THEN
        RETURN QUERY
        SELECT c.hour_at, c.hour_at + INTERVAL '1 hour',
               c.entity || ' ' || c.subject || ': ' ||
               string_agg(c.item || ' ' || round(c.value, 1) || ' ' || c.operator || ' ' || c.limit_value, ', '
                          ORDER BY c.item),
               c.entity || ',threshold'
          FROM measure.threshold_check(p_system, p_from, p_to, NULL, NULL, true) c
         WHERE c.broken AND (p_shifts IS NULL OR c.shift_no = ANY (p_shifts))
         GROUP BY c.hour_at, c.entity, c.subject
         ORDER BY 1, 3;
        RETURN;
    END IF;
    RETURN QUERY
    WITH r AS MATERIALIZED (
        SELECT r.start_at, r.end_at, r.entity, r.item, r.subject, r.rules, r.broken_hours::bigint AS hours
          FROM _measure.threshold_rollup r
         WHERE v_tier = 'shift' AND r.system_id = v_sys AND r.grain = 'shift' AND r.broken_hours > 0
           AND r.item <> '*' AND r.start_at >= p_from AND r.start_at <= p_to
           AND (p_shifts IS NULL OR r.shift_no = ANY (p_shifts))
        UNION ALL     -- a month's rows of the chosen shifts combined
        SELECT r.start_at, max(r.end_at), r.entity, r.item, r.subject, max(r.rules), sum(r.broken_hours)::bigint
          FROM _measure.threshold_rollup r
         WHERE v_tier = 'month' AND r.system_id = v_sys AND r.grain = 'month' AND r.broken_hours > 0
           AND r.item <> '*' AND r.start_at < p_to AND r.end_at > p_from AND r.start_at >= p_from - INTERVAL '32 days'
           AND (p_shifts IS NULL OR r.shift_no = ANY (p_shifts))
         GROUP BY r.start_at, r.entity, r.item, r.subject),
    i AS (        -- per item: its hours, subjects, and the subject with the most hours (ties: the first by name)
        SELECT r.start_at, max(r.end_at) AS end_at, r.entity, r.item, max(r.rules) AS rules,
               sum(r.hours) AS hours, count(*) AS subjects,
               min(lpad((1000000000 - r.hours)::text, 10, '0') || r.subject) AS worst
          FROM r GROUP BY r.start_at, r.entity, r.item)
    SELECT i.start_at, max(i.end_at),
           i.entity || ': ' || string_agg(
               i.item || ' ' || i.rules || ' ' || i.hours || ' h, ' || i.subjects
               || CASE WHEN i.subjects = 1 THEN ' subject' ELSE ' subjects' END || ', most ' || substr(i.worst, 11)
               || ' (' || (1000000000 - substr(i.worst, 1, 10)::bigint) || ' h)', '; ' ORDER BY i.item),
           i.entity || ',threshold'
      FROM i GROUP BY i.start_at, i.entity
     ORDER BY 1, 3;
END
$$;
REVOKE ALL ON FUNCTION measure.threshold_annotations(text, timestamptz, timestamptz, integer[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.threshold_annotations(text, timestamptz, timestamptz, integer[])
    TO measure_writer, measure_api, measure_reader;
COMMENT ON FUNCTION measure.threshold_annotations(text, timestamptz, timestamptz, integer[]) IS
    'Threshold violations as annotations: per hour and subject up to 7 days, else per shift or month and entity type.';

-- ---------------------------------------------------------------- terminals
--
-- TERMINAL counters (a line's subdevices) reach no hour tier of 010-tiers.sql: LINE counters
-- are summed over them. The interval records are kept ~35 days and a week of 1,600
-- terminals at 1-minute intervals is 16 million of them, so the dashboard reads what
-- condensing keeps (060-dashboard-rollups.sql): _measure.terminal_hour per terminal and UTC
-- hour, and _measure.terminal_rollup per shift and per month.

-- Condense the terminal records of the given hours (called by _measure.condense_upper, after
-- the hour tiers of those hours): their hour rows (an hour whose records are already purged
-- keeps its rows), then their shifts and months (_measure.condense_terminal_rollups).
-- The terminal hour rows of the given UTC hours: one measurement per terminal and hour (the
-- most measured time, ties the lower id). A function of its own so that the grouping of the
-- intervals is a query that can be planned in parallel (an INSERT never is) and by hashing
-- (sorting the intervals carries each run's counters array per interval: 7.8 GB spilled to
-- disk for a ref16 day when the partitions of the runs had no statistics yet).
CREATE OR REPLACE FUNCTION _measure.terminal_hour_rows(p_system smallint, p_hours timestamptz[])
RETURNS SETOF _measure.terminal_hour LANGUAGE plpgsql STABLE
SET work_mem = '256MB' SET enable_sort = off AS $$
DECLARE
    v_type smallint := (SELECT type_code FROM _measure.entity_type WHERE entity = 'terminal');
    c_req integer;
    c_reads integer;
    c_writes integer;
    c_trans integer;
    c_in integer;
    c_out integer;
    c_resp integer;
    v_lo timestamptz := (SELECT min(h) FROM unnest(p_hours) h);
    v_hi timestamptz := (SELECT max(h) FROM unnest(p_hours) h) + INTERVAL '1 hour';
BEGIN
    IF v_type IS NULL OR p_hours IS NULL OR cardinality(p_hours) = 0 THEN
        RETURN;
    END IF;
    SELECT max(position) FILTER (WHERE counter = 'requests'), max(position) FILTER (WHERE counter = 'reads'),
           max(position) FILTER (WHERE counter = 'writes'), max(position) FILTER (WHERE counter = 'transactions'),
           max(position) FILTER (WHERE counter = 'input_bytes'), max(position) FILTER (WHERE counter = 'output_bytes'),
           max(position) FILTER (WHERE counter = 'response_time')
      INTO c_req, c_reads, c_writes, c_trans, c_in, c_out, c_resp
      FROM _measure.counter_def WHERE entity = 'terminal';
    RETURN QUERY
    WITH x AS MATERIALIZED (
            SELECT p_system, ir.hour_at, ir.entity_id, ir.measurement_id, count(*)::integer,
                   sum(ir.delta_us)::bigint AS elapsed_us,
                   sum(greatest(ir.c[ir.i][c_req], 0))::bigint, sum(greatest(ir.c[ir.i][c_reads], 0))::bigint,
                   sum(greatest(ir.c[ir.i][c_writes], 0))::bigint, sum(greatest(ir.c[ir.i][c_trans], 0))::bigint,
                   sum(greatest(ir.c[ir.i][c_in], 0))::bigint, sum(greatest(ir.c[ir.i][c_out], 0))::bigint,
                   sum(greatest(ir.c[ir.i][c_resp], 0))::bigint,
                   max(greatest(ir.c[ir.i][c_resp], 0)::numeric / nullif(greatest(ir.c[ir.i][c_trans], 0), 0))
              FROM _measure.intervals(p_system, v_type, v_lo, v_hi) ir
             WHERE ir.hour_at = ANY (p_hours)
             GROUP BY ir.entity_id, ir.measurement_id, 2)
    SELECT DISTINCT ON (x.entity_id, x.hour_at) x.*
      FROM x
     ORDER BY x.entity_id, x.hour_at, x.elapsed_us DESC, x.measurement_id;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.terminal_hour_rows(smallint, timestamptz[]) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.condense_terminals(p_system smallint, p_hours timestamptz[])
RETURNS void LANGUAGE plpgsql SET work_mem = '256MB' AS $$
BEGIN
    IF p_hours IS NULL OR cardinality(p_hours) = 0 THEN
        RETURN;
    END IF;
    IF to_regclass('pg_temp._term_hour') IS NULL THEN  -- (IF NOT EXISTS would NOTICE on every call)
        CREATE TEMP TABLE _term_hour (LIKE _measure.terminal_hour) ON COMMIT DROP;
    END IF;
    TRUNCATE _term_hour;
    INSERT INTO _term_hour  -- (computed where the system's runs are: 130-shard-route.sql)
    SELECT r.* FROM (SELECT count(*) FROM _measure.shard_route WHERE system_id = p_system) one
     CROSS JOIN LATERAL _measure.terminal_hour_rows(p_system, p_hours) r;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    DELETE FROM _measure.terminal_hour t
     WHERE t.system_id = p_system AND t.hour_at = ANY (ARRAY(SELECT DISTINCT hour_at FROM _term_hour));
    INSERT INTO _measure.terminal_hour SELECT * FROM _term_hour;
    PERFORM _measure.condense_terminal_rollups(p_system, ARRAY(SELECT DISTINCT hour_at FROM _term_hour));
END
$$;
GRANT EXECUTE ON FUNCTION _measure.condense_terminals(smallint, timestamptz[]) TO measure_writer;

-- The shift rows of _measure.terminal_rollup for every shift that contains one of p_hours,
-- from _measure.terminal_hour (their months: _measure.terminal_months, by
-- _measure.condense_months).
CREATE OR REPLACE FUNCTION _measure.condense_terminal_rollups(p_system smallint, p_hours timestamptz[])
RETURNS void LANGUAGE plpgsql SET work_mem = '256MB' AS $$
BEGIN
    IF to_regclass('pg_temp._term_shift') IS NULL THEN  -- (IF NOT EXISTS would NOTICE on every call)
        CREATE TEMP TABLE _term_shift (shift_day date, shift_no smallint, start_at timestamptz,
                                       end_at timestamptz) ON COMMIT DROP;
    END IF;
    TRUNCATE _term_shift;
    INSERT INTO _term_shift SELECT s.* FROM _measure.shifts_of_hours(p_system, p_hours) s;
    DELETE FROM _measure.terminal_rollup t USING _term_shift a
     WHERE t.system_id = p_system AND t.grain = 'shift' AND t.start_at >= a.start_at AND t.start_at < a.end_at;
    INSERT INTO _measure.terminal_rollup (system_id, grain, start_at, shift_no, entity_id, end_at, bucket, hours,
                                          samples, elapsed_us, requests, reads, writes, transactions, input_bytes,
                                          output_bytes, response_us, response_max_us)
    SELECT p_system, 'shift', a.start_at, a.shift_no, h.entity_id, a.end_at, a.shift_day, count(*), sum(h.samples),
           sum(h.elapsed_us), sum(h.requests), sum(h.reads), sum(h.writes), sum(h.transactions),
           sum(h.input_bytes), sum(h.output_bytes), sum(h.response_us), max(h.response_max_us)
      FROM _term_shift a
      JOIN _measure.terminal_hour h ON h.system_id = p_system AND h.hour_at >= a.start_at AND h.hour_at < a.end_at
     GROUP BY a.start_at, a.shift_no, h.entity_id, a.end_at, a.shift_day;

END
$$;
GRANT EXECUTE ON FUNCTION _measure.condense_terminal_rollups(smallint, timestamptz[]) TO measure_writer;

-- The month rows of _measure.terminal_rollup of the given local months and shift numbers,
-- from their shift rows (called by _measure.condense_months).
CREATE OR REPLACE FUNCTION _measure.terminal_months(p_system smallint, p_months date[], p_nos smallint[])
RETURNS void LANGUAGE plpgsql SET work_mem = '256MB' AS $$
DECLARE
    v_tz text := (SELECT time_zone FROM _measure.system WHERE system_id = p_system);
BEGIN
    IF cardinality(p_months) = 0 THEN
        RETURN;
    END IF;
    DELETE FROM _measure.terminal_rollup t
     WHERE t.system_id = p_system AND t.grain = 'month' AND t.bucket = ANY (p_months) AND t.shift_no = ANY (p_nos);
    INSERT INTO _measure.terminal_rollup (system_id, grain, start_at, shift_no, entity_id, end_at, bucket, hours,
                                          samples, elapsed_us, requests, reads, writes, transactions, input_bytes,
                                          output_bytes, response_us, response_max_us)
    SELECT p_system, 'month', (m.month + time '00:00') AT TIME ZONE v_tz, t.shift_no, t.entity_id,
           ((m.month + INTERVAL '1 month')::date + time '00:00') AT TIME ZONE v_tz, m.month, sum(t.hours),
           sum(t.samples), sum(t.elapsed_us), sum(t.requests), sum(t.reads), sum(t.writes), sum(t.transactions),
           sum(t.input_bytes), sum(t.output_bytes), sum(t.response_us), max(t.response_max_us)
      FROM _measure.terminal_rollup t
     CROSS JOIN LATERAL (SELECT date_trunc('month', t.bucket)::date AS month) m
     WHERE t.system_id = p_system AND t.grain = 'shift'
       AND t.start_at >= ((SELECT min(x) FROM unnest(p_months) x) - 1 + time '00:00') AT TIME ZONE v_tz
       AND t.start_at < ((SELECT max(x) FROM unnest(p_months) x) + INTERVAL '1 month' + INTERVAL '1 day')
                        AT TIME ZONE v_tz
       AND m.month = ANY (p_months) AND t.shift_no = ANY (p_nos)
     GROUP BY m.month, t.shift_no, t.entity_id;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.terminal_months(smallint, date[], smallint[]) TO measure_writer;

-- The terminal rows of one system for the tier p_tier ('hour', 'shift' or 'month') over
-- [from, to], per bucket and terminal (entity_id), as sums: hours (hour_at, its shift),
-- shifts (their start, shift_no) or months (their first local midnight, the chosen shifts
-- combined: shift_no NULL). p_lines: only the terminals of those lines (NULL: all).
DROP FUNCTION IF EXISTS _measure.terminal_rows(smallint, text, timestamptz, timestamptz, integer[], text[]);
CREATE OR REPLACE FUNCTION _measure.terminal_rows(p_system smallint, p_tier text, p_from timestamptz,
                                                  p_to timestamptz, p_shifts integer[], p_lines text[],
                                                  p_entities bigint[] DEFAULT NULL)
RETURNS TABLE (bucket_at timestamptz, shift_no smallint, entity_id bigint, hours bigint, elapsed_us bigint,
               requests bigint, transactions bigint, bytes bigint, response_us bigint, response_max_us numeric)
LANGUAGE sql STABLE AS $$
    WITH hs AS MATERIALIZED (     -- the hours of the range with their shift (the calendar)
        SELECT ss.hour_at, ss.shift_no
          FROM _measure.shift_hours(p_system, p_from, p_to + INTERVAL '1 microsecond') ss
         WHERE p_tier = 'hour' AND (p_shifts IS NULL OR ss.shift_no = ANY (p_shifts)))
    -- the terminals of the lines asked for; no lookup at all when every line is (p_lines NULL,
    -- see terminal_lines: a week of 1,600 terminals is 268,800 hour rows)
    SELECT h.hour_at, hs.shift_no, h.entity_id, 1::bigint, h.elapsed_us, h.requests, h.transactions,
           h.input_bytes + h.output_bytes, h.response_us, h.response_max_us
      FROM _measure.terminal_hour h
      JOIN hs ON hs.hour_at = h.hour_at
     WHERE p_tier = 'hour' AND h.system_id = p_system AND h.hour_at >= p_from AND h.hour_at <= p_to
       AND (p_entities IS NULL OR h.entity_id = ANY (p_entities))
       AND (p_lines IS NULL OR h.entity_id IN (SELECT e.entity_id FROM _measure.entity e
                                                WHERE e.system_id = p_system AND e.ids->>'line_name' = ANY (p_lines)))
    UNION ALL
    SELECT r.start_at, r.shift_no, r.entity_id, r.hours::bigint, r.elapsed_us, r.requests, r.transactions,
           r.input_bytes + r.output_bytes, r.response_us, r.response_max_us
      FROM _measure.terminal_rollup r
      JOIN _measure.entity e ON e.entity_id = r.entity_id
     WHERE p_tier = 'shift' AND r.system_id = p_system AND r.grain = 'shift'
       AND r.start_at >= p_from AND r.start_at <= p_to
       AND (p_entities IS NULL OR r.entity_id = ANY (p_entities))
       AND (p_shifts IS NULL OR r.shift_no = ANY (p_shifts))
       AND (p_lines IS NULL OR e.ids->>'line_name' = ANY (p_lines))
    UNION ALL
    SELECT r.start_at, NULL::smallint, r.entity_id, sum(r.hours)::bigint, sum(r.elapsed_us)::bigint,
           sum(r.requests)::bigint, sum(r.transactions)::bigint, sum(r.input_bytes + r.output_bytes)::bigint,
           sum(r.response_us)::bigint, max(r.response_max_us)
      FROM _measure.terminal_rollup r
      JOIN _measure.entity e ON e.entity_id = r.entity_id
     WHERE p_tier = 'month' AND r.system_id = p_system AND r.grain = 'month'
       AND r.start_at < p_to AND r.end_at > p_from AND r.start_at >= p_from - INTERVAL '32 days'
       AND (p_entities IS NULL OR r.entity_id = ANY (p_entities))
       AND (p_shifts IS NULL OR r.shift_no = ANY (p_shifts))
       AND (p_lines IS NULL OR e.ids->>'line_name' = ANY (p_lines))
     GROUP BY r.start_at, r.entity_id
$$;
GRANT EXECUTE ON FUNCTION _measure.terminal_rows(smallint, text, timestamptz, timestamptz, integer[], text[],
                                                 bigint[])
    TO measure_writer;

-- Per terminal, the sums over the whole range [from, to] of the rows terminal_rows gives for
-- the tier p_tier. On the hour tier a shift whose every hour lies in the range is read from
-- its shift row of _measure.terminal_rollup (the sums of those same hours, kept by
-- condense_terminal_rollups and by calendar edits), and only the hours of the shifts the
-- range cuts from _measure.terminal_hour: a week of 1,600 terminals is 21 shift rows and a
-- few edge hours per terminal instead of 268,800 hour rows. Shifts that began before the
-- hour tier's retention horizon are read by their hours (their rollup may count hours
-- retention has since dropped).
CREATE OR REPLACE FUNCTION _measure.terminal_totals(p_system smallint, p_tier text, p_from timestamptz,
                                                    p_to timestamptz, p_shifts integer[], p_lines text[])
RETURNS TABLE (entity_id bigint, hours bigint, elapsed_us numeric, requests numeric, transactions numeric,
               bytes numeric, response_us numeric, response_max_us numeric)
LANGUAGE sql STABLE AS $$
    WITH hs AS MATERIALIZED (     -- the hours of the range, their shift, and whether all of it is in the range
        SELECT ss.hour_at, ss.shift_no, ss.start_at,
               ss.start_at >= _measure.horizon('hour')
               AND measure.hour_end(ss.start_at) >= p_from
               AND measure.hour_start(ss.end_at - INTERVAL '1 microsecond') <= p_to AS whole
          FROM _measure.shift_hours(p_system, p_from, p_to + INTERVAL '1 microsecond') ss
         WHERE p_tier = 'hour' AND (p_shifts IS NULL OR ss.shift_no = ANY (p_shifts))),
    rows AS (
        SELECT r.entity_id, r.hours::bigint AS hours, r.elapsed_us, r.requests, r.transactions,
               r.input_bytes + r.output_bytes AS bytes, r.response_us, r.response_max_us
          FROM _measure.terminal_rollup r
          JOIN (SELECT DISTINCT hs.start_at, hs.shift_no FROM hs WHERE hs.whole) w
            ON w.start_at = r.start_at AND w.shift_no = r.shift_no
         WHERE r.system_id = p_system AND r.grain = 'shift' AND r.start_at >= p_from - INTERVAL '1 day'
           AND r.start_at <= p_to
        UNION ALL   -- (the edge hours as an array: an index condition, not a join the planner
                    -- would hash on the week's side, not knowing how few hours hs has)
        SELECT h.entity_id, 1, h.elapsed_us, h.requests, h.transactions, h.input_bytes + h.output_bytes,
               h.response_us, h.response_max_us
          FROM _measure.terminal_hour h
         WHERE h.system_id = p_system AND h.hour_at >= p_from AND h.hour_at <= p_to
           AND h.hour_at = ANY (ARRAY(SELECT hs.hour_at FROM hs WHERE NOT hs.whole))
        UNION ALL
        SELECT t.entity_id, t.hours, t.elapsed_us, t.requests, t.transactions, t.bytes, t.response_us,
               t.response_max_us
          FROM _measure.terminal_rows(p_system, p_tier, p_from, p_to, p_shifts, NULL) t
         WHERE p_tier <> 'hour')
    SELECT x.entity_id, sum(x.hours)::bigint, sum(x.elapsed_us), sum(x.requests), sum(x.transactions),
           sum(x.bytes), sum(x.response_us), max(x.response_max_us)
      FROM rows x
     WHERE p_lines IS NULL OR x.entity_id IN (SELECT e.entity_id FROM _measure.entity e
                                               WHERE e.system_id = p_system AND e.ids->>'line_name' = ANY (p_lines))
     GROUP BY x.entity_id
$$;
GRANT EXECUTE ON FUNCTION _measure.terminal_totals(smallint, text, timestamptz, timestamptz, integer[], text[])
    TO measure_writer;

-- p_lines, or NULL when it names every line of the system's terminals (no filter to apply).
CREATE OR REPLACE FUNCTION _measure.terminal_lines(p_system smallint, p_lines text[])
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_lines IS NULL OR NOT EXISTS (
                    SELECT 1 FROM _measure.entity e JOIN _measure.entity_type t ON t.type_code = e.type_code
                     WHERE e.system_id = p_system AND t.entity = 'terminal'
                       AND NOT e.ids->>'line_name' = ANY (p_lines))
                THEN NULL ELSE p_lines END
$$;
GRANT EXECUTE ON FUNCTION _measure.terminal_lines(smallint, text[]) TO measure_writer;

-- Per terminal and bucket of the tier that fits [from, to] (measure.dashboard_tier): hours,
-- shifts, or months (the chosen shifts combined: shift_no NULL). lines: only the terminals of
-- those lines (NULL: all); top: only the top terminals with the highest average response
-- over the range (NULL: all; ties: line, terminal). Rates are over the measured time of the
-- bucket; response_seconds_max is the largest interval average (RESPONSE-TIME / TRANSACTIONS
-- of one interval record).
DROP FUNCTION IF EXISTS measure.terminal_series(text, timestamptz, timestamptz, integer[], text[]);
CREATE OR REPLACE FUNCTION measure.terminal_series(p_system text, p_from timestamptz, p_to timestamptz,
                                                   p_shifts integer[] DEFAULT NULL, p_lines text[] DEFAULT NULL,
                                                   p_top integer DEFAULT NULL)
RETURNS TABLE (bucket_at timestamptz, tier text, shift_no smallint, line text, terminal text,
               elapsed_seconds numeric, transactions numeric, transactions_per_second numeric,
               response_seconds_avg numeric, response_seconds_max numeric, requests_per_second numeric,
               bytes_per_second numeric)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
    SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_sys smallint := measure.system_id_of(p_system);
    v_tier text := measure.dashboard_tier(p_from, p_to);
    v_lines text[] := _measure.terminal_lines(v_sys, p_lines);
    v_top bigint[];
BEGIN
    IF p_top IS NOT NULL THEN   -- the top terminals from their totals, then only their rows
        v_top := ARRAY(
            SELECT a.entity_id
              FROM _measure.terminal_totals(v_sys, v_tier, p_from, p_to, p_shifts, v_lines) a
              JOIN _measure.entity e ON e.entity_id = a.entity_id
             ORDER BY a.response_us / nullif(a.transactions, 0) DESC NULLS LAST, e.ids->>'line_name',
                      e.ids->>'subdev_name'
             LIMIT p_top);
    END IF;
    RETURN QUERY
    SELECT r.bucket_at, v_tier, r.shift_no, e.ids->>'line_name', e.ids->>'subdev_name',
           r.elapsed_us / 1e6, r.transactions::numeric, measure.per_second(r.transactions, r.elapsed_us),
           r.response_us::numeric / nullif(r.transactions, 0) / 1e6, r.response_max_us / 1e6,
           measure.per_second(r.requests, r.elapsed_us), measure.per_second(r.bytes, r.elapsed_us)
      FROM _measure.terminal_rows(v_sys, v_tier, p_from, p_to, p_shifts, v_lines, v_top) r
      JOIN _measure.entity e ON e.entity_id = r.entity_id
     ORDER BY 1, 4, 5;
END
$$;
REVOKE ALL ON FUNCTION measure.terminal_series(text, timestamptz, timestamptz, integer[], text[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.terminal_series(text, timestamptz, timestamptz, integer[], text[], integer)
    TO measure_writer, measure_api, measure_reader;
COMMENT ON FUNCTION measure.terminal_series(text, timestamptz, timestamptz, integer[], text[], integer) IS
    'TERMINAL counters per terminal (line, subdevice) and bucket of the tier that fits [from, to] '
    '(optionally only the top terminals by average response): transactions, rates, average and worst '
    'interval response.';

-- The terminals over the whole range [from, to] (tier as measure.terminal_series): one row per
-- terminal with its measured hours, transactions, transactions per second, average response
-- per transaction, the worst interval average, requests and bytes per second; slowest
-- (highest average response) first, at most p_top rows (NULL: all).
CREATE OR REPLACE FUNCTION measure.terminal_summary(p_system text, p_from timestamptz, p_to timestamptz,
                                                    p_shifts integer[] DEFAULT NULL, p_lines text[] DEFAULT NULL,
                                                    p_top integer DEFAULT NULL)
RETURNS TABLE (line text, terminal text, hours bigint, transactions numeric, transactions_per_second numeric,
               response_seconds_avg numeric, response_seconds_max numeric, requests_per_second numeric,
               bytes_per_second numeric)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
    SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_sys smallint := measure.system_id_of(p_system);
    v_tier text := measure.dashboard_tier(p_from, p_to);
    v_lines text[] := _measure.terminal_lines(v_sys, p_lines);
BEGIN
    RETURN QUERY
    SELECT e.ids->>'line_name', e.ids->>'subdev_name', a.hours, a.transactions,
           measure.per_second(a.transactions, a.elapsed_us), a.response_us / nullif(a.transactions, 0) / 1e6,
           a.response_max_us / 1e6, measure.per_second(a.requests, a.elapsed_us),
           measure.per_second(a.bytes, a.elapsed_us)
      FROM _measure.terminal_totals(v_sys, v_tier, p_from, p_to, p_shifts, v_lines) a
      JOIN _measure.entity e ON e.entity_id = a.entity_id
     ORDER BY 6 DESC NULLS LAST, 1, 2
     LIMIT p_top;
END
$$;
REVOKE ALL ON FUNCTION measure.terminal_summary(text, timestamptz, timestamptz, integer[], text[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.terminal_summary(text, timestamptz, timestamptz, integer[], text[], integer)
    TO measure_writer, measure_api, measure_reader;
COMMENT ON FUNCTION measure.terminal_summary(text, timestamptz, timestamptz, integer[], text[], integer) IS
    'TERMINAL counters per terminal over [from, to], slowest (highest average response) first.';

-- Per bucket (tier as measure.terminal_series), the spread of the terminals' average response
-- per transaction: the mean over all their transactions, the 90th percentile and the largest
-- of the terminals' own averages (terminals without transactions in the bucket left out),
-- how many terminals had transactions, and their transactions per second together.
CREATE OR REPLACE FUNCTION measure.terminal_spread(p_system text, p_from timestamptz, p_to timestamptz,
                                                   p_shifts integer[] DEFAULT NULL, p_lines text[] DEFAULT NULL)
RETURNS TABLE (bucket_at timestamptz, tier text, terminals bigint, transactions_per_second numeric,
               response_seconds_mean numeric, response_seconds_p90 double precision,
               response_seconds_max numeric)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
    SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_sys smallint := measure.system_id_of(p_system);
    v_tier text := measure.dashboard_tier(p_from, p_to);
    v_lines text[] := _measure.terminal_lines(v_sys, p_lines);
BEGIN
    IF v_tier = 'hour' THEN   -- each hour's spread, then only the hours of the chosen shifts (a
        RETURN QUERY          -- week of 1,600 terminals: 268,800 rows aggregated, 168 joined)
        -- (the largest average: the terminal with the largest double-precision average, then
        -- its exact numeric one; a numeric division per row cost as much as the rest of the
        -- aggregate. Two averages within 1e-16 of each other could pick the other one.)
        SELECT g.hour_at, v_tier, g.terminals, g.tps, g.mean, g.p90,
               g.top[2]::bigint::numeric / g.top[3]::bigint / 1e6 FROM (
            SELECT h.hour_at, count(*) FILTER (WHERE h.transactions > 0) AS terminals,
                   sum(h.transactions) * 1e6 / nullif(max(h.elapsed_us), 0) AS tps,
                   sum(h.response_us)::numeric / nullif(sum(h.transactions), 0) / 1e6 AS mean,
                   percentile_cont(0.9) WITHIN GROUP (ORDER BY h.response_us::double precision
                                                               / nullif(h.transactions, 0)) / 1e6 AS p90,
                   max(ARRAY[h.response_us::double precision / h.transactions, h.response_us, h.transactions])
                       FILTER (WHERE h.transactions > 0) AS top
              FROM _measure.terminal_hour h
             WHERE h.system_id = v_sys AND h.hour_at >= p_from AND h.hour_at <= p_to
               AND (v_lines IS NULL OR h.entity_id IN (SELECT e.entity_id FROM _measure.entity e
                                                        WHERE e.system_id = v_sys
                                                          AND e.ids->>'line_name' = ANY (v_lines)))
             GROUP BY h.hour_at) g
         WHERE g.hour_at IN (SELECT ss.hour_at FROM _measure.shift_hours(v_sys, p_from, p_to + INTERVAL '1 microsecond') ss
                              WHERE p_shifts IS NULL OR ss.shift_no = ANY (p_shifts))
         ORDER BY 1;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT r.bucket_at, v_tier, count(*) FILTER (WHERE r.transactions > 0),
           sum(r.transactions) * 1e6 / nullif(max(r.elapsed_us), 0),
           sum(r.response_us)::numeric / nullif(sum(r.transactions), 0) / 1e6,
           percentile_cont(0.9) WITHIN GROUP (ORDER BY r.response_us::double precision / nullif(r.transactions, 0))
               / 1e6,
           max(r.response_us::numeric / nullif(r.transactions, 0)) / 1e6
      FROM _measure.terminal_rows(v_sys, v_tier, p_from, p_to, p_shifts, v_lines) r
     GROUP BY r.bucket_at
     ORDER BY 1;
END
$$;
REVOKE ALL ON FUNCTION measure.terminal_spread(text, timestamptz, timestamptz, integer[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.terminal_spread(text, timestamptz, timestamptz, integer[], text[])
    TO measure_writer, measure_api, measure_reader;
COMMENT ON FUNCTION measure.terminal_spread(text, timestamptz, timestamptz, integer[], text[]) IS
    'Per bucket: mean, 90th percentile and largest of the terminals'' average response per transaction.';

-- ---------------------------------------------------------------- capacity

CREATE OR REPLACE FUNCTION measure.capacity_series(p_system text, p_from timestamptz, p_to timestamptz,
                                                   p_capacity numeric DEFAULT 70,
                                                   p_horizon_days integer DEFAULT 90)
RETURNS TABLE (day_at timestamptz, entity text, subject text, peak_busy numeric, trend_busy numeric,
               band_low numeric, band_high numeric, capacity numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET work_mem = '64MB' AS $$
    WITH sys AS (
        SELECT s.system_id, s.time_zone, (p_from AT TIME ZONE s.time_zone)::date AS d0,
               (p_to AT TIME ZONE s.time_zone)::date AS d1
          FROM _measure.system s WHERE s.system_id = measure.system_id_of(p_system)),
    d AS (        -- BUSY-MAX-D of measure.cpu_shift / disc_shift, read from the shift tier's busy item
        SELECT v.entity, v.subject, v.shift_day AS day, max(v.vmax) AS peak
          FROM sys JOIN _measure.tier_shift v ON v.system_id = sys.system_id
         WHERE v.entity IN ('cpu', 'disc') AND v.item = 'busy' AND v.shift_day BETWEEN sys.d0 AND sys.d1
         GROUP BY 1, 2, 3),
    fit AS (
        SELECT d.entity, d.subject, regr_slope(d.peak, d.day - sys.d0)::numeric AS slope,
               regr_intercept(d.peak, d.day - sys.d0)::numeric AS icpt
          FROM d, sys GROUP BY 1, 2),
    -- every day of the range and the horizon for every subject, then its peak if measured (one
    -- hash join on subject and day)
    grid AS MATERIALIZED (
        SELECT f.entity, f.subject, f.slope, f.icpt, gs::date AS day
          FROM sys CROSS JOIN fit f
         CROSS JOIN generate_series(sys.d0, sys.d1 + p_horizon_days, INTERVAL '1 day') gs)
    SELECT (g.day + time '00:00') AT TIME ZONE sys.time_zone, g.entity, g.subject, d.peak,
           round(g.icpt + g.slope * (g.day - sys.d0), 3),
           round(0.85 * (g.icpt + g.slope * (g.day - sys.d0)), 3),
           round(1.15 * (g.icpt + g.slope * (g.day - sys.d0)), 3),
           p_capacity
      FROM sys
     CROSS JOIN grid g
      LEFT JOIN d ON d.entity = g.entity AND d.subject = g.subject AND d.day = g.day
     ORDER BY 1, 2, 3
$$;
REVOKE ALL ON FUNCTION measure.capacity_series(text, timestamptz, timestamptz, numeric, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.capacity_series(text, timestamptz, timestamptz, numeric, integer)
    TO measure_writer, measure_api, measure_reader;
