-- 050-config: the platform's configuration as validated functions (issue 17): systems,
-- calendars (shifts per weekday, holidays, effective-from dates; schema/110-calendar.sql) and
-- thresholds. `measuredb system | calendar | threshold` call the _measure functions; the API
-- (/admin/systems, /admin/thresholds, admin tokens) calls the measure.* wrappers at the end.
--
-- Every write is one call, so one transaction: it validates everything first and raises
-- SQLSTATE 22023 (invalid_parameter_value) with COLUMN = the field at fault (name,
-- time_zone, shifts[2].begin, ...), P0002 for an unknown system (or calendar version,
-- holiday, threshold), 23505 for a name or number taken, 55000 for what the state forbids
-- (renaming a system its collector registers). Nothing is half applied.
--
-- A change that alters past tiers recondenses exactly the shift days it changes, in the same
-- transaction (_measure.calendar_before / _measure.calendar_after): the shifts of the days it
-- can touch are taken before and after the change, and only the days whose shifts differ
-- are recondensed (shift tier, threshold and terminal rollups of those shift days and the
-- month and year rows of their months; the violations of their hours, whose thresholds
-- depend on the shift). Days whose hour tiers retention removed keep their rows. The result
-- says how many shift days with data and hours were recondensed. Threshold changes alter no
-- stored tier; the violations, threshold lines and rollups that cache threshold results are
-- re-resolved by the trigger on _measure.threshold (040-dashboards.sql) for exactly the
-- systems and entity types the change applies to, and the result says how many hours.

-- ---------------------------------------------------------------- helpers

CREATE OR REPLACE FUNCTION _measure.config_fail(p_field text, p_message text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '22023', COLUMN = p_field, MESSAGE = p_message;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.config_fail(text, text) TO measure_writer;

-- '\demo', 'DEMO', ' \Demo ' all name \DEMO.
CREATE OR REPLACE FUNCTION _measure.system_name_of(p_text text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_text IS NULL THEN NULL
                WHEN left(btrim(p_text), 1) = '\' THEN upper(btrim(p_text))
                ELSE '\' || upper(btrim(p_text)) END
$$;
GRANT EXECUTE ON FUNCTION _measure.system_name_of(text) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.config_system(p_system text, p_field text DEFAULT 'system')
RETURNS smallint LANGUAGE plpgsql STABLE AS $$
DECLARE
    v smallint;
BEGIN
    SELECT s.system_id INTO v FROM _measure.system s WHERE s.system_name = _measure.system_name_of(p_system);
    IF v IS NULL THEN
        RAISE EXCEPTION 'unknown system %', coalesce(p_system, 'NULL') USING ERRCODE = 'P0002', COLUMN = p_field,
              HINT = 'systems: ' || coalesce((SELECT string_agg(s.system_name, ', ' ORDER BY s.system_name)
                                                FROM _measure.system s), '(none yet)');
    END IF;
    RETURN v;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.config_system(text, text) TO measure_writer;

-- The NonStop processor types a system's CPUs may be: the 1986 ones and today's NONSTOP-X
-- (an L-series blade of several IPUs; the simulated node `today`). Every type the simulated
-- nodes know (collector/node/topology.py PROCESSOR_TYPES) must be here
-- (tests/collector/node/test_later.py).
CREATE OR REPLACE FUNCTION _measure.cpu_type_names()
RETURNS text[] LANGUAGE sql IMMUTABLE
RETURN ARRAY['NONSTOP-I', 'NONSTOP-II', 'TXP', 'VLX', 'EXT10', 'EXT25', 'CLX', 'CYCLONE', 'NONSTOP-X'];
GRANT EXECUTE ON FUNCTION _measure.cpu_type_names() TO measure_writer;

-- A whole hour 'HH', 'H:00' or 'HH:00' in [0, p_max] as a time ('24:00' = the end of the day).
CREATE OR REPLACE FUNCTION _measure.config_hour(p_value jsonb, p_field text, p_max integer)
RETURNS time LANGUAGE plpgsql AS $$
DECLARE
    m text[];
BEGIN
    IF p_value IS NULL OR jsonb_typeof(p_value) <> 'string' THEN
        PERFORM _measure.config_fail(p_field, format('%s: give a whole hour as "HH:00" (00:00 to %s:00)',
                                                     p_field, p_max));
    END IF;
    m := regexp_match(p_value #>> '{}', '^\s*(\d{1,2})(?::(\d{2}))?\s*$');
    IF m IS NULL OR m[1]::integer > p_max THEN
        PERFORM _measure.config_fail(p_field, format('%s: %s is not a time of day from 00:00 to %s:00',
                                                     p_field, p_value #>> '{}', p_max));
    END IF;
    IF coalesce(m[2], '00') <> '00' THEN
        PERFORM _measure.config_fail(p_field, format('%s: %s is not a whole hour (shifts begin and end on the hour)',
                                                     p_field, p_value #>> '{}'));
    END IF;
    RETURN make_time(m[1]::integer, 0, 0);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.config_hour(jsonb, text, integer) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.weekday_name(p_day integer)
RETURNS text LANGUAGE sql IMMUTABLE
RETURN (ARRAY['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'])[p_day];
GRANT EXECUTE ON FUNCTION _measure.weekday_name(integer) TO measure_writer;

-- ---------------------------------------------------------------- recondensing a calendar change

-- Before a change of the shifts of the shift days [p_first, p_last] of a system (its calendar
-- or its time zone): lock out condensing (the lock threshold edits take: a condensing that
-- started before commits first, one that starts later sees the change) and remember the shifts
-- of those days, as far as the system has data (a day either side).
CREATE OR REPLACE FUNCTION _measure.calendar_before(p_system smallint, p_first date, p_last date)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_lo timestamptz;
    v_hi timestamptz;
    v_tz text := (SELECT s.time_zone FROM _measure.system s WHERE s.system_id = p_system);
BEGIN
    PERFORM pg_advisory_xact_lock(1296385364);
    IF to_regclass('pg_temp._cal_before') IS NULL THEN  -- (IF NOT EXISTS would NOTICE on every call)
        CREATE TEMP TABLE _cal_before (shift_day date, shift_no smallint, start_at timestamptz,
                                       end_at timestamptz) ON COMMIT DROP;
        CREATE TEMP TABLE _cal_range (system_id smallint, first_day date, last_day date) ON COMMIT DROP;
    END IF;
    TRUNCATE _cal_before, _cal_range;
    SELECT sp.lo, sp.hi INTO v_lo, v_hi FROM _measure.hour_span(p_system) sp;
    IF v_lo IS NULL THEN
        RETURN;
    END IF;
    -- (two days of slack: a time zone change moves local days by up to 26 hours)
    p_first := greatest(p_first, (v_lo AT TIME ZONE v_tz)::date - 2);
    p_last := least(p_last, (v_hi AT TIME ZONE v_tz)::date + 2);
    IF p_first > p_last THEN
        RETURN;
    END IF;
    INSERT INTO _cal_range VALUES (p_system, p_first, p_last);
    INSERT INTO _cal_before SELECT * FROM _measure.calendar_instances(p_system, p_first, p_last);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.calendar_before(smallint, date, date) TO measure_writer;

-- After the change: the shift days whose shifts differ now, and of those the ones whose hours
-- are still kept, are recondensed. Returns {days, hours, first_day, last_day}: the shift days
-- with data recondensed and their hours (as they were or are now in a shift).
CREATE OR REPLACE FUNCTION _measure.calendar_after()
RETURNS jsonb LANGUAGE plpgsql SET work_mem = '256MB' AS $$
DECLARE
    v_sys smallint;
    v_first date;
    v_last date;
    v_kept timestamptz := _measure.horizon('hour');
    v_kept_day timestamptz := _measure.horizon('day');
    v_days date[];
    v_hours timestamptz[];
    v_new_hours timestamptz[];
    v_data_days date[];
    v_months date[];
BEGIN
    SELECT r.system_id, r.first_day, r.last_day INTO v_sys, v_first, v_last FROM _cal_range r;
    IF v_sys IS NULL THEN
        RETURN jsonb_build_object('days', 0, 'hours', 0, 'first_day', NULL, 'last_day', NULL);
    END IF;
    IF to_regclass('pg_temp._cal_after') IS NULL THEN  -- (IF NOT EXISTS would NOTICE on every call)
        CREATE TEMP TABLE _cal_after (shift_day date, shift_no smallint, start_at timestamptz,
                                      end_at timestamptz) ON COMMIT DROP;
        CREATE TEMP TABLE _cal_hour (hour_at timestamptz, shift_day date, now_in boolean) ON COMMIT DROP;
    END IF;
    TRUNCATE _cal_after, _cal_hour;
    INSERT INTO _cal_after SELECT * FROM _measure.calendar_instances(v_sys, v_first, v_last);
    -- the shift days whose shifts changed, but not those with hours retention removed
    v_days := ARRAY(
        SELECT x.shift_day
          FROM ((SELECT * FROM _cal_before EXCEPT SELECT * FROM _cal_after)
                UNION (SELECT * FROM _cal_after EXCEPT SELECT * FROM _cal_before)) x
         GROUP BY x.shift_day
        HAVING NOT EXISTS (SELECT 1 FROM _cal_before b WHERE b.shift_day = x.shift_day AND b.start_at < v_kept)
           AND NOT EXISTS (SELECT 1 FROM _cal_after a WHERE a.shift_day = x.shift_day AND a.start_at < v_kept)
         ORDER BY 1);
    IF cardinality(v_days) = 0 THEN
        RETURN jsonb_build_object('days', 0, 'hours', 0, 'first_day', NULL, 'last_day', NULL);
    END IF;
    -- their hours with data, in the shifts they had and have
    INSERT INTO _cal_hour
    SELECT g, c.shift_day, c.now_in
      FROM (SELECT b.*, false AS now_in FROM _cal_before b WHERE b.shift_day = ANY (v_days)
            UNION ALL
            SELECT a.*, true FROM _cal_after a WHERE a.shift_day = ANY (v_days)) c
     CROSS JOIN LATERAL generate_series(
           date_bin(INTERVAL '1 hour', c.start_at + INTERVAL '1 hour' - INTERVAL '1 microsecond',
                    TIMESTAMPTZ '2000-01-01 00:00:00+00'),
           c.end_at - INTERVAL '1 microsecond', INTERVAL '1 hour') g
     WHERE EXISTS (SELECT 1 FROM _measure.cpu_hour h WHERE h.system_id = v_sys AND h.hour_at = g)
        OR EXISTS (SELECT 1 FROM _measure.disc_hour h WHERE h.system_id = v_sys AND h.hour_at = g)
        OR EXISTS (SELECT 1 FROM _measure.line_hour h WHERE h.system_id = v_sys AND h.hour_at = g)
        OR EXISTS (SELECT 1 FROM _measure.process_hour h WHERE h.system_id = v_sys AND h.hour_at = g)
        OR EXISTS (SELECT 1 FROM _measure.userdef_hour h WHERE h.system_id = v_sys AND h.hour_at = g)
        OR EXISTS (SELECT 1 FROM _measure.tmf_hour h WHERE h.system_id = v_sys AND h.hour_at = g)
        OR EXISTS (SELECT 1 FROM _measure.terminal_hour h WHERE h.system_id = v_sys AND h.hour_at = g);
    v_hours := ARRAY(SELECT DISTINCT hour_at FROM _cal_hour ORDER BY 1);
    v_new_hours := ARRAY(SELECT DISTINCT hour_at FROM _cal_hour WHERE now_in ORDER BY 1);
    v_data_days := ARRAY(SELECT DISTINCT shift_day FROM _cal_hour ORDER BY 1);

    -- the shift level of those days: nothing of what they were is kept
    DELETE FROM _measure.tier_shift t WHERE t.system_id = v_sys AND t.shift_day = ANY (v_days);
    DELETE FROM _measure.threshold_rollup t
     WHERE t.system_id = v_sys AND t.grain = 'shift' AND t.bucket = ANY (v_days);
    DELETE FROM _measure.terminal_rollup t
     WHERE t.system_id = v_sys AND t.grain = 'shift' AND t.bucket = ANY (v_days);
    IF to_regclass('pg_temp._aff_shift') IS NULL THEN
        CREATE TEMP TABLE _aff_shift (shift_day date, shift_no smallint,
                                      start_at timestamptz, end_at timestamptz) ON COMMIT DROP;
    END IF;
    TRUNCATE _aff_shift;
    INSERT INTO _aff_shift SELECT a.* FROM _cal_after a WHERE a.shift_day = ANY (v_days);
    PERFORM _measure.condense_shift_rows(v_sys);
    -- holidays changed: the baselines of those hours and of the weeks that learned from them
    PERFORM _measure.condense_analysis(v_sys, v_hours);  -- 060-analysis.sql
    -- the violations of their hours (a threshold may hold for one shift only), the threshold
    -- lines and rollups, while the system's stored violations are complete
    IF EXISTS (SELECT 1 FROM _measure.breach_state b WHERE b.system_id = v_sys) THEN
        IF to_regclass('pg_temp._thr_shift') IS NULL THEN
            CREATE TEMP TABLE _thr_shift (shift_day date, shift_no smallint, start_at timestamptz,
                                          end_at timestamptz) ON COMMIT DROP;
        END IF;
        TRUNCATE _thr_shift;
        INSERT INTO _thr_shift SELECT a.* FROM _cal_after a WHERE a.shift_day = ANY (v_days);
        BEGIN
            DELETE FROM _measure.hour_breach b WHERE b.system_id = v_sys AND b.hour_at = ANY (v_hours);
            PERFORM _measure.threshold_resolve(v_sys, NULL, false);
            PERFORM _measure.condense_threshold_lines(v_sys, v_hours);
        EXCEPTION WHEN invalid_parameter_value THEN
            DELETE FROM _measure.breach_state WHERE system_id = v_sys;
        END;
    END IF;
    IF cardinality(v_new_hours) > 0 THEN
        PERFORM _measure.condense_terminal_rollups(v_sys, v_new_hours);
    END IF;
    -- their months and years (every shift number: one may have gone), but not a month whose
    -- first days retention dropped
    v_months := ARRAY(SELECT DISTINCT date_trunc('month', d)::date FROM unnest(v_days) d
                       WHERE NOT isfinite(v_kept_day) OR date_trunc('month', d)::date >= (v_kept_day AT TIME ZONE 'UTC')::date
                       ORDER BY 1);
    PERFORM _measure.condense_month_rows(v_sys, v_months, ARRAY[1, 2, 3, 4, 5, 6, 7, 8, 9]::smallint[]);
    TRUNCATE _cal_range;
    RETURN jsonb_build_object('days', cardinality(v_data_days), 'hours', cardinality(v_hours),
                              'first_day', v_data_days[1], 'last_day', v_data_days[cardinality(v_data_days)]);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.calendar_after() TO measure_writer;

-- ---------------------------------------------------------------- systems

-- Systems with what a list shows: CPU types, the collector that feeds it, measurements,
-- the first and last hour with data, calendar versions, holidays, thresholds of its own.
CREATE OR REPLACE FUNCTION _measure.system_info(p_system smallint DEFAULT NULL)
RETURNS TABLE (system_name text, system_number smallint, time_zone text, os_version text, cpu_types jsonb,
               collector text, measurements bigint, first_hour timestamptz, last_hour timestamptz,
               calendars bigint, holidays bigint, thresholds bigint, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT s.system_name, s.system_number, s.time_zone, s.os_version,
           coalesce((SELECT jsonb_agg(jsonb_build_object('cpu', ct.cpu, 'cpu_type', ct.cpu_type)
                                      ORDER BY ct.cpu NULLS FIRST)
                       FROM _measure.system_cpu_type ct WHERE ct.system_id = s.system_id), '[]'::jsonb),
           (SELECT string_agg(c.collector_id || ' (node ' || c.node || ')', ', ' ORDER BY c.collector_id)
              FROM _measure.collector_state c WHERE c.system_id = s.system_id),
           (SELECT count(*) FROM _measure.measurement m WHERE m.system_id = s.system_id),
           sp.lo, sp.hi - INTERVAL '1 hour',
           (SELECT count(*) FROM _measure.calendar c WHERE c.system_id = s.system_id),
           (SELECT count(*) FROM _measure.holiday h WHERE h.system_id = s.system_id),
           (SELECT count(*) FROM _measure.threshold t WHERE t.system_id = s.system_id),
           s.created_at
      FROM _measure.system s
     CROSS JOIN LATERAL _measure.hour_span(s.system_id) sp
     WHERE p_system IS NULL OR s.system_id = p_system
     ORDER BY s.system_name
$$;
GRANT EXECUTE ON FUNCTION _measure.system_info(smallint) TO measure_writer;

-- Replace a system's CPU types by p_types: [{"cpu": 0..15 or null (every CPU not listed),
-- "cpu_type": "VLX"}, ...].
CREATE OR REPLACE FUNCTION _measure.config_cpu_types(p_system smallint, p_types jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    e jsonb;
    i integer;
    v_cpu smallint;
    v_type text;
    v_seen integer[] := '{}';
BEGIN
    IF p_types IS NULL OR jsonb_typeof(p_types) <> 'array' THEN
        PERFORM _measure.config_fail('cpu_types', 'cpu_types: give a list of {"cpu": N or null, "cpu_type": T}');
    END IF;
    IF to_regclass('pg_temp._cfg_cpu') IS NULL THEN
        CREATE TEMP TABLE _cfg_cpu (cpu smallint, cpu_type text) ON COMMIT DROP;
    END IF;
    TRUNCATE _cfg_cpu;
    FOR e, i IN SELECT x.value, x.ordinality - 1 FROM jsonb_array_elements(p_types) WITH ORDINALITY x LOOP
        IF jsonb_typeof(e) <> 'object' THEN
            PERFORM _measure.config_fail(format('cpu_types[%s]', i), format('cpu_types[%s]: give {"cpu": N or null, "cpu_type": T}', i));
        END IF;
        IF jsonb_typeof(e->'cpu') IS DISTINCT FROM 'null' AND e ? 'cpu' THEN
            IF jsonb_typeof(e->'cpu') <> 'number' OR (e->>'cpu') !~ '^\d{1,2}$' OR (e->>'cpu')::integer > 15 THEN
                PERFORM _measure.config_fail(format('cpu_types[%s].cpu', i),
                    format('cpu_types[%s].cpu: %s is no CPU number (0 to 15; null: every CPU not listed)', i, e->'cpu'));
            END IF;
            v_cpu := (e->>'cpu')::smallint;
        ELSE
            v_cpu := NULL;
        END IF;
        v_type := upper(btrim(e->>'cpu_type'));
        IF v_type IS NULL OR NOT v_type = ANY (_measure.cpu_type_names()) THEN
            PERFORM _measure.config_fail(format('cpu_types[%s].cpu_type', i),
                format('cpu_types[%s].cpu_type: %s is no CPU type (one of %s)', i, coalesce(e->>'cpu_type', 'null'),
                       array_to_string(_measure.cpu_type_names(), ', ')));
        END IF;
        IF coalesce(v_cpu, -1) = ANY (v_seen) THEN
            PERFORM _measure.config_fail(format('cpu_types[%s].cpu', i),
                format('cpu_types[%s].cpu: %s is given twice', i, coalesce('CPU ' || v_cpu, 'every CPU (null)')));
        END IF;
        v_seen := v_seen || coalesce(v_cpu, -1)::integer;
        INSERT INTO _cfg_cpu VALUES (v_cpu, v_type);
    END LOOP;
    DELETE FROM _measure.system_cpu_type WHERE system_id = p_system;
    INSERT INTO _measure.system_cpu_type (system_id, cpu, cpu_type) SELECT p_system, cpu, cpu_type FROM _cfg_cpu;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.config_cpu_types(smallint, jsonb) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.config_check_system(p_system smallint, p_name text, p_number integer,
                                                        p_time_zone text, p_os_version text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_other text;
BEGIN
    IF p_name IS NULL OR p_name !~ '^\\[A-Z][A-Z0-9]{0,6}$' THEN
        PERFORM _measure.config_fail('name', format('name: %s is no system name: a backslash, a letter and up '
                                                    'to 6 letters or digits (\DEMO)', coalesce(p_name, 'null')));
    END IF;
    SELECT s.system_name INTO v_other FROM _measure.system s
     WHERE s.system_name = p_name AND s.system_id IS DISTINCT FROM p_system;
    IF v_other IS NOT NULL THEN
        RAISE EXCEPTION 'name: a system named % exists already', p_name USING ERRCODE = '23505', COLUMN = 'name';
    END IF;
    IF p_number IS NULL OR p_number NOT BETWEEN 0 AND 254 THEN
        PERFORM _measure.config_fail('number', format('number: %s is no system (Expand node) number: 0 to 254',
                                                      coalesce(p_number::text, 'null')));
    END IF;
    SELECT s.system_name INTO v_other FROM _measure.system s
     WHERE s.system_number = p_number AND s.system_id IS DISTINCT FROM p_system;
    IF v_other IS NOT NULL THEN
        RAISE EXCEPTION 'number: system number % is %''s already', p_number, v_other
              USING ERRCODE = '23505', COLUMN = 'number';
    END IF;
    IF p_time_zone IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_names z WHERE z.name = p_time_zone) THEN
        PERFORM _measure.config_fail('time_zone', format('time_zone: %s is no time zone name (Area/City, e.g. '
                                                         'America/Los_Angeles, Europe/Berlin, UTC)',
                                                         coalesce(p_time_zone, 'null')));
    END IF;
    IF p_os_version IS NULL OR p_os_version !~ '^[A-Z][0-9]{2}(\.[0-9]{2})?$' THEN
        PERFORM _measure.config_fail('os_version', format('os_version: %s is no NonStop OS version (a letter and two '
                                                          'digits: B30, C00, G06.32)', coalesce(p_os_version, 'null')));
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.config_check_system(smallint, text, integer, text, text) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.system_add(p_name text, p_number integer, p_time_zone text,
                                               p_os_version text DEFAULT 'B30', p_cpu_types jsonb DEFAULT '[]')
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_name text := _measure.system_name_of(p_name);
    v_id smallint;
BEGIN
    PERFORM _measure.config_check_system(NULL, v_name, p_number, btrim(p_time_zone),
                                         upper(btrim(coalesce(p_os_version, 'B30'))));
    INSERT INTO _measure.system (system_name, system_number, time_zone, os_version)
    VALUES (v_name, p_number, btrim(p_time_zone), upper(btrim(coalesce(p_os_version, 'B30'))))
    RETURNING system_id INTO v_id;
    PERFORM _measure.config_cpu_types(v_id, coalesce(p_cpu_types, '[]'));
    RETURN v_name;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.system_add(text, integer, text, text, jsonb) TO measure_writer;

-- Change some of a system's fields: p_changes holds the fields to change (name, number,
-- time_zone, os_version, cpu_types); the others stay. A system a collector registers keeps the
-- name of its node file (the collector registers it by name); its time zone and CPU types are
-- the node file's only until changed here (the collector keeps what is configured). A new time
-- zone moves every shift day: they are recondensed (and the CPU trend days). Returns
-- {system, recondensed}.
CREATE OR REPLACE FUNCTION _measure.system_set(p_system text, p_changes jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint := _measure.config_system(p_system);
    v_old _measure.system;
    v_key text;
    v_name text;
    v_number integer;
    v_tz text;
    v_os text;
    v_collector text;
    v_lo timestamptz;
    v_hi timestamptz;
    v_kept timestamptz;
    v_first_day date;
    v_result jsonb;
BEGIN
    IF p_changes IS NULL OR jsonb_typeof(p_changes) <> 'object' THEN
        PERFORM _measure.config_fail('body', 'give the fields to change: name, number, time_zone, os_version, cpu_types');
    END IF;
    FOR v_key IN SELECT jsonb_object_keys(p_changes) LOOP
        IF v_key NOT IN ('name', 'number', 'time_zone', 'os_version', 'cpu_types') THEN
            PERFORM _measure.config_fail(v_key, format('%s: no such field of a system (name, number, time_zone, '
                                                       'os_version, cpu_types)', v_key));
        END IF;
    END LOOP;
    SELECT * INTO v_old FROM _measure.system s WHERE s.system_id = v_sys FOR UPDATE;
    v_name := CASE WHEN p_changes ? 'name' THEN _measure.system_name_of(p_changes->>'name') ELSE v_old.system_name END;
    IF p_changes ? 'number' AND (jsonb_typeof(p_changes->'number') <> 'number' OR (p_changes->>'number') !~ '^\d{1,5}$') THEN
        PERFORM _measure.config_fail('number', format('number: %s is no system (Expand node) number: 0 to 254',
                                                      p_changes->'number'));
    END IF;
    v_number := CASE WHEN p_changes ? 'number' THEN (p_changes->>'number')::integer ELSE v_old.system_number END;
    v_tz := CASE WHEN p_changes ? 'time_zone' THEN btrim(p_changes->>'time_zone') ELSE v_old.time_zone END;
    v_os := CASE WHEN p_changes ? 'os_version' THEN upper(btrim(p_changes->>'os_version')) ELSE v_old.os_version END;
    PERFORM _measure.config_check_system(v_sys, v_name, v_number, v_tz, v_os);
    SELECT string_agg(c.collector_id || ' (node ' || c.node || ')', ', ') INTO v_collector
      FROM _measure.collector_state c WHERE c.system_id = v_sys;
    IF v_collector IS NOT NULL AND v_name <> v_old.system_name THEN
        RAISE EXCEPTION 'name: % is registered by collector % under the name of its node file; rename it there',
              v_old.system_name, v_collector USING ERRCODE = '55000', COLUMN = 'name';
    END IF;
    IF p_changes ? 'cpu_types' THEN
        PERFORM _measure.config_cpu_types(v_sys, p_changes->'cpu_types');
    END IF;
    IF v_tz <> v_old.time_zone THEN
        -- every shift day with data, in the old zone and the new one
        SELECT sp.lo, sp.hi INTO v_lo, v_hi FROM _measure.hour_span(v_sys) sp;
        PERFORM _measure.calendar_before(v_sys, least((v_lo AT TIME ZONE v_old.time_zone)::date,
                                                      (v_lo AT TIME ZONE v_tz)::date) - 1,
                                         greatest((v_hi AT TIME ZONE v_old.time_zone)::date,
                                                  (v_hi AT TIME ZONE v_tz)::date) + 1);
    END IF;
    UPDATE _measure.system s SET system_name = v_name, system_number = v_number, time_zone = v_tz, os_version = v_os
     WHERE s.system_id = v_sys;
    IF v_tz <> v_old.time_zone THEN
        v_result := _measure.calendar_after();
        -- the CPU trend line of each local day (as far as hour tiers are kept)
        v_kept := _measure.horizon('hour');
        v_first_day := CASE WHEN isfinite(v_kept) THEN (v_kept AT TIME ZONE v_tz)::date + 1 ELSE date '-infinity' END;
        DELETE FROM _measure.cpu_trend_day t WHERE t.system_id = v_sys AND t.day >= v_first_day;
        PERFORM _measure.condense_trend_days(v_sys, ARRAY(
            SELECT DISTINCT (h.hour_at AT TIME ZONE v_tz)::date FROM _measure.cpu_hour h
             WHERE h.system_id = v_sys AND (h.hour_at AT TIME ZONE v_tz)::date >= v_first_day));
    END IF;
    RETURN jsonb_build_object('system', v_name, 'recondensed', v_result);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.system_set(text, jsonb) TO measure_writer;

-- Remove a system that was never measured (a mistake); one with measurements, entities or a
-- collector keeps its data and is refused.
CREATE OR REPLACE FUNCTION _measure.system_remove(p_system text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint := _measure.config_system(p_system);
    v_name text := (SELECT s.system_name FROM _measure.system s WHERE s.system_id = v_sys);
    v_meas bigint := (SELECT count(*) FROM _measure.measurement m WHERE m.system_id = v_sys);
    v_ent bigint := (SELECT count(*) FROM _measure.entity e WHERE e.system_id = v_sys);
    v_coll bigint := (SELECT count(*) FROM _measure.collector_state c WHERE c.system_id = v_sys);
BEGIN
    IF v_meas + v_ent + v_coll > 0 THEN
        RAISE EXCEPTION USING ERRCODE = '55000', COLUMN = 'system',
              MESSAGE = format('system: %s has %s measurement(s), %s %s and %s collector(s): only a system that '
                               'was never measured can be removed', v_name, v_meas, v_ent,
                               CASE WHEN v_ent = 1 THEN 'entity' ELSE 'entities' END, v_coll);
    END IF;
    BEGIN
        DELETE FROM _measure.system s WHERE s.system_id = v_sys;
    EXCEPTION WHEN foreign_key_violation THEN
        RAISE EXCEPTION 'system: % still has data (%): only a system that was never measured can be removed',
              v_name, SQLERRM USING ERRCODE = '55000', COLUMN = 'system';
    END;
    RETURN v_name;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.system_remove(text) TO measure_writer;

-- ---------------------------------------------------------------- calendars

-- A system's calendar: its base shifts, its versions (shifts grouped by weekdays) and its
-- holidays, as JSON.
CREATE OR REPLACE FUNCTION _measure.calendar_show(p_system text)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH s AS (SELECT * FROM _measure.system WHERE system_id = _measure.config_system(p_system))
    SELECT jsonb_build_object(
        'system', s.system_name,
        'time_zone', s.time_zone,
        'base', jsonb_build_object(
            'source', CASE WHEN EXISTS (SELECT 1 FROM _measure.shift sh WHERE sh.system_id = s.system_id)
                           THEN 'system' ELSE 'default' END,
            'until', (SELECT min(c.effective_from) - 1 FROM _measure.calendar c WHERE c.system_id = s.system_id),
            'shifts', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                    'shift_no', ss.shift_no, 'name', ss.name, 'weekdays', '[1,2,3,4,5,6,7]'::jsonb,
                                    'begin', to_char(ss.begin_time, 'HH24:MI'), 'end', to_char(ss.end_time, 'HH24:MI'),
                                    'crosses_midnight', ss.crosses_midnight) ORDER BY ss.shift_no)
                                  FROM _measure.system_shift ss WHERE ss.system_id = s.system_id), '[]'::jsonb)),
        'versions', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                       'effective_from', c.effective_from,
                       'until', (SELECT min(n.effective_from) - 1 FROM _measure.calendar n
                                  WHERE n.system_id = c.system_id AND n.effective_from > c.effective_from),
                       'holiday_shift', c.holiday_shift, 'holiday_name', c.holiday_name,
                       'shifts', coalesce((
                           SELECT jsonb_agg(jsonb_build_object(
                                      'shift_no', g.shift_no, 'name', g.name, 'weekdays', to_jsonb(g.weekdays),
                                      'begin', to_char(g.begin_time, 'HH24:MI'), 'end', to_char(g.end_time, 'HH24:MI'),
                                      'crosses_midnight', g.end_time <= g.begin_time)
                                  ORDER BY g.shift_no, g.weekdays[1])
                             FROM (SELECT cs.shift_no, cs.name, cs.begin_time, cs.end_time,
                                          array_agg(cs.weekday ORDER BY cs.weekday) AS weekdays
                                     FROM _measure.calendar_shift cs WHERE cs.calendar_id = c.calendar_id
                                    GROUP BY cs.shift_no, cs.name, cs.begin_time, cs.end_time) g), '[]'::jsonb))
                   ORDER BY c.effective_from)
              FROM _measure.calendar c WHERE c.system_id = s.system_id), '[]'::jsonb),
        'holidays', coalesce((SELECT jsonb_agg(jsonb_build_object('day', h.day, 'name', h.name) ORDER BY h.day)
                                FROM _measure.holiday h WHERE h.system_id = s.system_id), '[]'::jsonb))
      FROM s
$$;
GRANT EXECUTE ON FUNCTION _measure.calendar_show(text) TO measure_writer;

-- Set the calendar version of a system that applies from p_from (replacing the one that
-- started that day): p_shifts [{"shift_no": 1-9, "name": "day", "weekdays": [1-7 ...] (ISO,
-- 1 = Monday; absent: every day), "begin": "07:00", "end": "15:00"}, ...]; a shift whose end is
-- not after its begin crosses midnight. p_holiday_shift: the shift number of a holiday's hours
-- (NULL: no shift), named p_holiday_name. Shifts of one version may not overlap (a night shift
-- also not the next weekday's first shifts); where two versions meet, the earlier day's shift
-- ends where the later day's first shift begins. Recondenses the shift days it changes.
CREATE OR REPLACE FUNCTION _measure.calendar_set(p_system text, p_from date, p_shifts jsonb,
                                                 p_holiday_shift integer DEFAULT NULL,
                                                 p_holiday_name text DEFAULT 'holiday')
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint := _measure.config_system(p_system);
    v_next date;
    v_cal integer;
    e jsonb;
    i integer;
    v_no integer;
    v_name text;
    v_days integer[];
    v_begin time;
    v_end time;
    r record;
    v_result jsonb;
BEGIN
    IF p_from IS NULL OR NOT isfinite(p_from) THEN
        PERFORM _measure.config_fail('effective_from', 'effective_from: give the first day the calendar applies to');
    END IF;
    IF p_shifts IS NULL OR jsonb_typeof(p_shifts) <> 'array' OR jsonb_array_length(p_shifts) = 0 THEN
        PERFORM _measure.config_fail('shifts', 'shifts: give at least one shift (number, begin, end, weekdays)');
    END IF;
    IF p_holiday_shift IS NOT NULL AND p_holiday_shift NOT BETWEEN 1 AND 9 THEN
        PERFORM _measure.config_fail('holiday_shift', format('holiday_shift: %s is no shift number (1 to 9; none: '
                                                             'a holiday''s hours belong to no shift)', p_holiday_shift));
    END IF;
    IF p_holiday_name IS NULL OR length(p_holiday_name) > 32 THEN
        PERFORM _measure.config_fail('holiday_name', 'holiday_name: give a name of up to 32 characters');
    END IF;
    IF to_regclass('pg_temp._cfg_shift') IS NULL THEN
        CREATE TEMP TABLE _cfg_shift (idx integer, weekday smallint, shift_no smallint, name text,
                                      begin_time time, end_time time, lo interval, hi interval) ON COMMIT DROP;
    END IF;
    TRUNCATE _cfg_shift;
    FOR e, i IN SELECT x.value, x.ordinality - 1 FROM jsonb_array_elements(p_shifts) WITH ORDINALITY x LOOP
        IF jsonb_typeof(e) <> 'object' THEN
            PERFORM _measure.config_fail(format('shifts[%s]', i), format('shifts[%s]: give {"shift_no", "begin", '
                                                                         '"end", "weekdays", "name"}', i));
        END IF;
        IF jsonb_typeof(e->'shift_no') IS DISTINCT FROM 'number' OR (e->>'shift_no') !~ '^[1-9]$' THEN
            PERFORM _measure.config_fail(format('shifts[%s].shift_no', i),
                format('shifts[%s].shift_no: %s is no shift number (1 to 9)', i, coalesce(e->'shift_no', 'null'::jsonb)));
        END IF;
        v_no := (e->>'shift_no')::integer;
        v_name := coalesce(e->>'name', '');
        IF length(v_name) > 32 THEN
            PERFORM _measure.config_fail(format('shifts[%s].name', i), format('shifts[%s].name: up to 32 characters', i));
        END IF;
        v_begin := _measure.config_hour(e->'begin', format('shifts[%s].begin', i), 23);
        v_end := _measure.config_hour(e->'end', format('shifts[%s].end', i), 24);
        IF e->'weekdays' IS NULL OR jsonb_typeof(e->'weekdays') = 'null' THEN
            v_days := ARRAY[1, 2, 3, 4, 5, 6, 7];
        ELSIF jsonb_typeof(e->'weekdays') <> 'array' OR jsonb_array_length(e->'weekdays') = 0
              OR EXISTS (SELECT 1 FROM jsonb_array_elements(e->'weekdays') d
                          WHERE jsonb_typeof(d) <> 'number' OR d::text !~ '^[1-7]$') THEN
            PERFORM _measure.config_fail(format('shifts[%s].weekdays', i),
                format('shifts[%s].weekdays: %s: give ISO weekdays 1 (Monday) to 7 (Sunday)', i, e->'weekdays'));
        ELSE
            v_days := ARRAY(SELECT d::text::integer FROM jsonb_array_elements(e->'weekdays') d);
        END IF;
        FOR r IN SELECT d FROM unnest(v_days) d LOOP
            IF EXISTS (SELECT 1 FROM _cfg_shift c WHERE c.weekday = r.d AND c.shift_no = v_no) THEN
                PERFORM _measure.config_fail(format('shifts[%s].weekdays', i),
                    format('shifts[%s].weekdays: shift %s is given twice for %s', i, v_no, _measure.weekday_name(r.d)));
            END IF;
            INSERT INTO _cfg_shift VALUES (i, r.d, v_no, v_name, v_begin, v_end,
                                           (r.d - 1) * INTERVAL '24 hours' + (v_begin - time '00:00'),
                                           (r.d - 1) * INTERVAL '24 hours'
                                           + CASE WHEN v_end <= v_begin THEN INTERVAL '24 hours' ELSE INTERVAL '0' END
                                           + (v_end - time '00:00'));
        END LOOP;
    END LOOP;
    -- no two shifts of the week overlap (Sunday's night shift runs into Monday)
    SELECT a.idx AS a_idx, b.idx AS b_idx, a.shift_no AS a_no, b.shift_no AS b_no, a.weekday AS a_day,
           b.weekday AS b_day, a.begin_time AS a_begin, a.end_time AS a_end, b.begin_time AS b_begin,
           b.end_time AS b_end
      INTO r
      FROM _cfg_shift a
      JOIN _cfg_shift b ON (b.weekday, b.shift_no) <> (a.weekday, a.shift_no)
     CROSS JOIN (VALUES (INTERVAL '0'), (INTERVAL '168 hours'), (INTERVAL '-168 hours')) w (wrap)
     WHERE a.lo < b.hi + w.wrap AND b.lo + w.wrap < a.hi
     ORDER BY greatest(a.idx, b.idx), least(a.idx, b.idx), a.idx DESC, a.weekday, b.weekday
     LIMIT 1;
    IF FOUND THEN
        PERFORM _measure.config_fail(format('shifts[%s]', greatest(r.a_idx, r.b_idx)),
            format('shifts[%s]: shift %s on %s (%s-%s) overlaps shift %s on %s (%s-%s)', greatest(r.a_idx, r.b_idx),
                   r.a_no, _measure.weekday_name(r.a_day), to_char(r.a_begin, 'HH24:MI'), to_char(r.a_end, 'HH24:MI'),
                   r.b_no, _measure.weekday_name(r.b_day), to_char(r.b_begin, 'HH24:MI'), to_char(r.b_end, 'HH24:MI')));
    END IF;
    IF p_holiday_shift IS NOT NULL AND EXISTS (SELECT 1 FROM _cfg_shift c WHERE c.shift_no = p_holiday_shift) THEN
        PERFORM _measure.config_fail('holiday_shift', format('holiday_shift: %s is a regular shift of this calendar; '
                                                             'choose a number of its own (e.g. 9)', p_holiday_shift));
    END IF;

    v_next := (SELECT min(c.effective_from) FROM _measure.calendar c
                WHERE c.system_id = v_sys AND c.effective_from > p_from);
    PERFORM _measure.calendar_before(v_sys, p_from - 1, coalesce(v_next - 1, date 'infinity'));
    DELETE FROM _measure.calendar c WHERE c.system_id = v_sys AND c.effective_from = p_from;
    INSERT INTO _measure.calendar (system_id, effective_from, holiday_shift, holiday_name)
    VALUES (v_sys, p_from, p_holiday_shift, p_holiday_name) RETURNING calendar_id INTO v_cal;
    INSERT INTO _measure.calendar_shift (calendar_id, weekday, shift_no, begin_time, end_time, name)
    SELECT v_cal, c.weekday, c.shift_no, c.begin_time, c.end_time, c.name FROM _cfg_shift c;
    v_result := _measure.calendar_after();
    RETURN jsonb_build_object('system', (SELECT system_name FROM _measure.system WHERE system_id = v_sys),
                              'effective_from', p_from, 'recondensed', v_result);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.calendar_set(text, date, jsonb, integer, text) TO measure_writer;

-- Remove the calendar version that starts on p_from: its days take the version before it (or
-- the base shifts). Recondenses the shift days it changes.
CREATE OR REPLACE FUNCTION _measure.calendar_remove(p_system text, p_from date)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint := _measure.config_system(p_system);
    v_next date;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM _measure.calendar c WHERE c.system_id = v_sys AND c.effective_from = p_from) THEN
        RAISE EXCEPTION 'effective_from: % has no calendar version from %', _measure.system_name_of(p_system),
              coalesce(p_from::text, 'null') USING ERRCODE = 'P0002', COLUMN = 'effective_from',
              HINT = 'versions from: ' || coalesce((SELECT string_agg(c.effective_from::text, ', ' ORDER BY c.effective_from)
                                                      FROM _measure.calendar c WHERE c.system_id = v_sys), '(none)');
    END IF;
    v_next := (SELECT min(c.effective_from) FROM _measure.calendar c
                WHERE c.system_id = v_sys AND c.effective_from > p_from);
    PERFORM _measure.calendar_before(v_sys, p_from - 1, coalesce(v_next - 1, date 'infinity'));
    DELETE FROM _measure.calendar c WHERE c.system_id = v_sys AND c.effective_from = p_from;
    RETURN jsonb_build_object('system', (SELECT system_name FROM _measure.system WHERE system_id = v_sys),
                              'effective_from', p_from, 'recondensed', _measure.calendar_after());
END
$$;
GRANT EXECUTE ON FUNCTION _measure.calendar_remove(text, date) TO measure_writer;

-- Make p_day a holiday (or rename it). Recondenses the shift days it changes (the day, and the
-- day before when its night shift ran into the day's first shift).
CREATE OR REPLACE FUNCTION _measure.holiday_set(p_system text, p_day date, p_name text DEFAULT '')
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint := _measure.config_system(p_system);
BEGIN
    IF p_day IS NULL OR NOT isfinite(p_day) THEN
        PERFORM _measure.config_fail('day', 'day: give the date of the holiday');
    END IF;
    IF length(coalesce(p_name, '')) > 64 THEN
        PERFORM _measure.config_fail('name', 'name: up to 64 characters');
    END IF;
    PERFORM _measure.calendar_before(v_sys, p_day - 1, p_day);
    INSERT INTO _measure.holiday (system_id, day, name) VALUES (v_sys, p_day, coalesce(p_name, ''))
        ON CONFLICT (system_id, day) DO UPDATE SET name = excluded.name;
    RETURN jsonb_build_object('system', (SELECT system_name FROM _measure.system WHERE system_id = v_sys),
                              'day', p_day, 'name', coalesce(p_name, ''), 'recondensed', _measure.calendar_after());
END
$$;
GRANT EXECUTE ON FUNCTION _measure.holiday_set(text, date, text) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.holiday_remove(p_system text, p_day date)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint := _measure.config_system(p_system);
BEGIN
    IF NOT EXISTS (SELECT 1 FROM _measure.holiday h WHERE h.system_id = v_sys AND h.day = p_day) THEN
        RAISE EXCEPTION 'day: % is no holiday of %', coalesce(p_day::text, 'null'), _measure.system_name_of(p_system)
              USING ERRCODE = 'P0002', COLUMN = 'day';
    END IF;
    PERFORM _measure.calendar_before(v_sys, p_day - 1, p_day);
    DELETE FROM _measure.holiday h WHERE h.system_id = v_sys AND h.day = p_day;
    RETURN jsonb_build_object('system', (SELECT system_name FROM _measure.system WHERE system_id = v_sys),
                              'day', p_day, 'recondensed', _measure.calendar_after());
END
$$;
GRANT EXECUTE ON FUNCTION _measure.holiday_remove(text, date) TO measure_writer;

-- ---------------------------------------------------------------- thresholds

-- The stored thresholds: with p_system, the rows that system takes (_measure.threshold_owned:
-- each decides the hours of at least one shift; in_force = enabled; source 'system', 'default',
-- or 'default (replaced in shift 3)' where a more specific row decides some of the system's
-- shifts) and the defaults it takes for none of its shifts ('default (replaced)', in_force
-- false); without, every stored row (system_name NULL: a default).
CREATE OR REPLACE FUNCTION _measure.threshold_list(p_system text DEFAULT NULL)
RETURNS TABLE (system_name text, entity text, item text, operator text, shift_no smallint, limit_value numeric,
               enabled boolean, help text, in_force boolean, source text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_sys smallint := CASE WHEN p_system IS NULL THEN NULL ELSE _measure.config_system(p_system) END;
    v_shifts smallint[];
BEGIN
    IF v_sys IS NULL THEN
        RETURN QUERY
        SELECT s.system_name, t.entity, t.item, t.operator, t.shift_no, t.limit_value, t.enabled, t.help, t.enabled,
               CASE WHEN t.system_id IS NULL THEN 'default' ELSE 'system' END
          FROM _measure.threshold t LEFT JOIN _measure.system s ON s.system_id = t.system_id
         ORDER BY s.system_name NULLS FIRST, t.entity, t.item, t.operator, t.shift_no NULLS FIRST;
        RETURN;
    END IF;
    v_shifts := _measure.system_shift_numbers(v_sys);
    RETURN QUERY
    WITH own AS (SELECT o.*, ARRAY(SELECT w.shift_no FROM _measure.threshold_winner w
                                    WHERE w.system_id = v_sys AND w.entity = o.entity AND w.item = o.item
                                      AND w.operator = o.operator AND w.threshold_id <> o.threshold_id
                                      AND w.shift_no = ANY (v_shifts)
                                      AND (o.shift_no IS NULL OR w.shift_no = o.shift_no)
                                    ORDER BY 1) AS replaced
                   FROM _measure.threshold_owned o WHERE o.system_id = v_sys)
    SELECT x.system_name, x.entity, x.item, x.operator, x.shift_no, x.limit_value, x.enabled, x.help, x.in_force,
           x.source
      FROM (SELECT CASE WHEN o.own THEN s.system_name END AS system_name, o.entity, o.item, o.operator,
                   o.shift_no, o.limit_value, o.enabled, o.help, o.enabled AS in_force,
                   CASE WHEN o.own THEN 'system'
                        WHEN cardinality(o.replaced) = 0 THEN 'default'
                        ELSE format('default (replaced in shift %s)', array_to_string(o.replaced, ', ')) END AS source
              FROM own o JOIN _measure.system s ON s.system_id = o.system_id
            UNION ALL
            SELECT NULL, t.entity, t.item, t.operator, t.shift_no, t.limit_value, t.enabled, t.help, false,
                   'default (replaced)'
              FROM _measure.threshold t
             WHERE t.system_id IS NULL
               AND NOT EXISTS (SELECT 1 FROM own o WHERE o.threshold_id = t.threshold_id)) x
     ORDER BY x.entity, x.item, x.operator, x.shift_no NULLS FIRST, x.in_force DESC;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.threshold_list(text) TO measure_writer;

-- The shift numbers of a system's calendars (base, versions, holiday shifts).
CREATE OR REPLACE FUNCTION _measure.system_shift_numbers(p_system smallint)
RETURNS smallint[] LANGUAGE sql STABLE AS $$
    SELECT ARRAY(SELECT DISTINCT n FROM (
        SELECT ss.shift_no AS n FROM _measure.system_shift ss WHERE ss.system_id = p_system
        UNION ALL
        SELECT cs.shift_no FROM _measure.calendar c JOIN _measure.calendar_shift cs ON cs.calendar_id = c.calendar_id
         WHERE c.system_id = p_system
        UNION ALL
        SELECT c.holiday_shift FROM _measure.calendar c WHERE c.system_id = p_system AND c.holiday_shift IS NOT NULL) x
        ORDER BY 1)
$$;
GRANT EXECUTE ON FUNCTION _measure.system_shift_numbers(smallint) TO measure_writer;

-- Validate the key of a threshold: system (NULL: the defaults), entity, item (a numeric column
-- of measure.<entity>_hour, as the threshold report reads it), operator, shift.
CREATE OR REPLACE FUNCTION _measure.threshold_key(p_system text, p_entity text, p_item text, p_operator text,
                                                  p_shift integer)
RETURNS smallint LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_sys smallint := CASE WHEN p_system IS NULL THEN NULL ELSE _measure.config_system(p_system) END;
    v_items text;
BEGIN
    IF p_entity IS NULL OR p_entity <> ALL (_measure.tiered_entities()) THEN
        PERFORM _measure.config_fail('entity', format('entity: %s is no entity type with thresholds (%s)',
                                                      coalesce(p_entity, 'null'),
                                                      array_to_string(_measure.tiered_entities(), ', ')));
    END IF;
    IF p_item IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                                      WHERE a.attrelid = format('measure.%I', p_entity || '_hour')::regclass
                                        AND a.attname = p_item AND a.attnum > 0 AND NOT a.attisdropped
                                        AND a.atttypid = 'numeric'::regtype) THEN
        SELECT string_agg(a.attname, ', ' ORDER BY a.attnum) INTO v_items FROM pg_catalog.pg_attribute a
         WHERE a.attrelid = format('measure.%I', p_entity || '_hour')::regclass AND a.attnum > 0
           AND NOT a.attisdropped AND a.atttypid = 'numeric'::regtype;
        PERFORM _measure.config_fail('item', format('item: %s is no item of measure.%s_hour (one of: %s)',
                                                    coalesce(p_item, 'null'), p_entity, v_items));
    END IF;
    IF p_operator IS NULL OR p_operator NOT IN ('>', '>=', '<', '<=') THEN
        PERFORM _measure.config_fail('operator', format('operator: %s is none of >, >=, <, <=', coalesce(p_operator, 'null')));
    END IF;
    IF p_shift IS NOT NULL AND (p_shift NOT BETWEEN 1 AND 9
                                OR (v_sys IS NOT NULL AND NOT p_shift = ANY (_measure.system_shift_numbers(v_sys)))) THEN
        PERFORM _measure.config_fail('shift', format('shift: %s is no shift of %s (%s; none: every shift)', p_shift,
            coalesce(_measure.system_name_of(p_system), 'any calendar'),
            CASE WHEN v_sys IS NULL THEN '1 to 9'
                 ELSE array_to_string(_measure.system_shift_numbers(v_sys), ', ') END));
    END IF;
    RETURN v_sys;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.threshold_key(text, text, text, text, integer) TO measure_writer;

-- How many hours the last threshold change re-evaluated: the hours of the entity type of every
-- system with complete stored violations that the change applies to.
CREATE OR REPLACE FUNCTION _measure.threshold_reevaluated(p_system smallint, p_entity text)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_systems integer;
    v_hours bigint;
BEGIN
    SELECT count(*) INTO v_systems FROM _measure.breach_state b WHERE p_system IS NULL OR b.system_id = p_system;
    EXECUTE format('SELECT count(*) FROM (SELECT DISTINCT h.system_id, h.hour_at FROM _measure.%I h '
                   'JOIN _measure.breach_state b ON b.system_id = h.system_id '
                   'WHERE $1 IS NULL OR h.system_id = $1) x', p_entity || '_hour')
    INTO v_hours USING p_system;
    RETURN jsonb_build_object('systems', v_systems, 'hours', v_hours);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.threshold_reevaluated(smallint, text) TO measure_writer;

-- Set a threshold (insert or change): of a system, or the default of every system without its
-- own (p_system NULL); of one shift, or of every shift (p_shift NULL). p_enabled false: the
-- threshold is switched off (a system's own row then switches a default off). p_help NULL
-- keeps the row's help. The stored violations are re-resolved in this transaction.
CREATE OR REPLACE FUNCTION _measure.threshold_set(p_system text, p_entity text, p_item text, p_operator text,
                                                  p_limit numeric, p_shift integer DEFAULT NULL,
                                                  p_enabled boolean DEFAULT true, p_help text DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint := _measure.threshold_key(p_system, p_entity, p_item, p_operator, p_shift);
BEGIN
    IF p_limit IS NULL OR p_limit IN ('NaN'::numeric, 'Infinity'::numeric, '-Infinity'::numeric) THEN
        PERFORM _measure.config_fail('limit', format('limit: give a number (%s %s ...)', p_item, p_operator));
    END IF;
    IF length(coalesce(p_help, '')) > 200 THEN
        PERFORM _measure.config_fail('help', 'help: up to 200 characters');
    END IF;
    UPDATE _measure.threshold t
       SET limit_value = p_limit, enabled = coalesce(p_enabled, true), help = coalesce(p_help, t.help)
     WHERE t.system_id IS NOT DISTINCT FROM v_sys AND t.entity = p_entity AND t.item = p_item
       AND t.operator = p_operator AND t.shift_no IS NOT DISTINCT FROM p_shift::smallint;
    IF NOT FOUND THEN
        INSERT INTO _measure.threshold (system_id, entity, item, operator, limit_value, enabled, help, shift_no)
        VALUES (v_sys, p_entity, p_item, p_operator, p_limit, coalesce(p_enabled, true), coalesce(p_help, ''),
                p_shift);
    END IF;
    RETURN jsonb_build_object(
        'threshold', (SELECT jsonb_build_object('system', s.system_name, 'entity', t.entity, 'item', t.item,
                                                'operator', t.operator, 'shift', t.shift_no, 'limit', t.limit_value,
                                                'enabled', t.enabled, 'help', t.help)
                        FROM _measure.threshold t LEFT JOIN _measure.system s ON s.system_id = t.system_id
                       WHERE t.system_id IS NOT DISTINCT FROM v_sys AND t.entity = p_entity AND t.item = p_item
                         AND t.operator = p_operator AND t.shift_no IS NOT DISTINCT FROM p_shift::smallint),
        'reevaluated', _measure.threshold_reevaluated(v_sys, p_entity));
END
$$;
GRANT EXECUTE ON FUNCTION _measure.threshold_set(text, text, text, text, numeric, integer, boolean, text)
    TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.threshold_remove(p_system text, p_entity text, p_item text, p_operator text,
                                                     p_shift integer DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint := _measure.threshold_key(p_system, p_entity, p_item, p_operator, p_shift);
BEGIN
    DELETE FROM _measure.threshold t
     WHERE t.system_id IS NOT DISTINCT FROM v_sys AND t.entity = p_entity AND t.item = p_item
       AND t.operator = p_operator AND t.shift_no IS NOT DISTINCT FROM p_shift::smallint;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', COLUMN = 'item',
              MESSAGE = format('item: %s has no %s threshold %s %s%s', coalesce(_measure.system_name_of(p_system), 'the default set'),
                               p_entity, p_item, p_operator,
                               CASE WHEN p_shift IS NULL THEN ' (every shift)' ELSE ' for shift ' || p_shift END);
    END IF;
    RETURN jsonb_build_object('removed', jsonb_build_object('system', _measure.system_name_of(p_system), 'entity', p_entity,
                                                            'item', p_item, 'operator', p_operator, 'shift', p_shift),
                              'reevaluated', _measure.threshold_reevaluated(v_sys, p_entity));
END
$$;
GRANT EXECUTE ON FUNCTION _measure.threshold_remove(text, text, text, text, integer) TO measure_writer;

-- ---------------------------------------------------------------- analysis settings

-- The settings of the automatic analysis (schema/230-analysis.sql, 060-analysis.sql,
-- docs/analysis.md "Settings and switches"): per system the weeks learned, the minor and major
-- bands and the relative floor (no row in _measure.analysis_setting: the defaults,
-- _measure.analysis_settings(NULL)); per baseline item its floor and per indicator of the
-- health verdict its limit and weight (every system's). A change of what the baselines learn
-- rebuilds the baselines it touches in the same transaction (_measure.analysis_rebuild, with
-- condensing locked out as threshold edits do) and says how many hours were judged again;
-- the verdict reads the indicators when it runs, so their change recomputes nothing stored.

-- (plpgsql: _measure.analysis_settings comes later, in 060-analysis.sql)
CREATE OR REPLACE FUNCTION _measure.analysis_config_json(p_system smallint)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT jsonb_build_object(
        'system', (SELECT s.system_name FROM _measure.system s WHERE s.system_id = p_system),
        'settings', jsonb_build_array(
            jsonb_build_object('setting', 'weeks', 'value', a.weeks, 'default', d.weeks,
                               'source', CASE WHEN a.weeks = d.weeks THEN 'default' ELSE 'system' END),
            jsonb_build_object('setting', 'minor', 'value', a.minor, 'default', d.minor,
                               'source', CASE WHEN a.minor = d.minor THEN 'default' ELSE 'system' END),
            jsonb_build_object('setting', 'major', 'value', a.major, 'default', d.major,
                               'source', CASE WHEN a.major = d.major THEN 'default' ELSE 'system' END),
            jsonb_build_object('setting', 'relative_floor', 'value', a.relative_floor, 'default', d.relative_floor,
                               'source', CASE WHEN a.relative_floor = d.relative_floor THEN 'default' ELSE 'system' END)),
        'floors', (SELECT coalesce(jsonb_agg(jsonb_build_object('entity', b.entity, 'item', b.item, 'floor', b.floor)
                                             ORDER BY b.entity, b.item), '[]'::jsonb)
                     FROM _measure.baseline_item b),
        'indicators', (SELECT coalesce(jsonb_agg(jsonb_build_object('indicator', h.indicator, 'limit', h.limit_value,
                                                                    'weight', h.weight, 'symptom', h.symptom)
                                                 ORDER BY h.ord), '[]'::jsonb)
                         FROM _measure.health_indicator h))
      FROM _measure.analysis_settings(p_system) a, _measure.analysis_settings(NULL::smallint) d);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.analysis_config_json(smallint) TO measure_writer;

-- A system's settings, each with its default and source ('system': its own, 'default'), and
-- the floors and indicators every system takes.
CREATE OR REPLACE FUNCTION _measure.analysis_show(p_system text)
RETURNS jsonb LANGUAGE sql STABLE
RETURN _measure.analysis_config_json(_measure.config_system(p_system));
GRANT EXECUTE ON FUNCTION _measure.analysis_show(text) TO measure_writer;

-- Judge every kept hour of the systems again (all with p_system NULL), condensing locked out:
-- {systems, hours (judged again), rows}.
CREATE OR REPLACE FUNCTION _measure.analysis_settings_changed(p_system smallint)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint;
    v_systems integer := 0;
    v_hours bigint := 0;
    v_rows bigint := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(1296385364);  -- 'MEBT', as threshold and calendar edits: condensing waits
    FOR v_sys IN SELECT s.system_id FROM _measure.system s
                  WHERE (p_system IS NULL OR s.system_id = p_system)
                    AND EXISTS (SELECT 1 FROM _measure.cpu_hour h WHERE h.system_id = s.system_id)
                  ORDER BY 1 LOOP
        v_rows := v_rows + _measure.analysis_rebuild(v_sys);  -- 060-analysis.sql
        v_systems := v_systems + 1;
        v_hours := v_hours + (SELECT count(DISTINCT b.hour_at) FROM _measure.hour_baseline b
                               WHERE b.system_id = v_sys AND b.severity IS NOT NULL);
    END LOOP;
    RETURN jsonb_build_object('systems', v_systems, 'hours', v_hours, 'rows', v_rows);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.analysis_settings_changed(smallint) TO measure_writer;

-- A number a setting takes: finite, and above p_above (or at least p_least); p_rule says which.
CREATE OR REPLACE FUNCTION _measure.config_number(p_field text, p_value double precision, p_rule text,
                                                  p_above double precision DEFAULT NULL,
                                                  p_least double precision DEFAULT NULL)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_value IS NULL OR p_value IN ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)
       OR p_value <= p_above OR p_value < p_least THEN
        PERFORM _measure.config_fail(p_field, format('%s: %s is not %s', p_field, coalesce(p_value::text, 'null'), p_rule));
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.config_number(text, double precision, text, double precision, double precision)
    TO measure_writer;

-- Change some of a system's settings (NULL: as it is): weeks 1 to 52, minor above 0, major
-- above minor, relative_floor 0 or more. Settings equal to the defaults leave no row. The
-- system's baselines are rebuilt when what they learn changed: {system, settings, floors,
-- indicators, rejudged}.
CREATE OR REPLACE FUNCTION _measure.analysis_set(p_system text, p_weeks integer DEFAULT NULL,
                                                 p_minor double precision DEFAULT NULL,
                                                 p_major double precision DEFAULT NULL,
                                                 p_relative_floor double precision DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint := _measure.config_system(p_system);
    v_old record;
    v_new record;
    v_default record;
BEGIN
    SELECT * INTO v_old FROM _measure.analysis_settings(v_sys);
    SELECT * INTO v_default FROM _measure.analysis_settings(NULL::smallint);
    IF p_weeks IS NOT NULL AND p_weeks NOT BETWEEN 1 AND 52 THEN
        PERFORM _measure.config_fail('weeks', format('weeks: %s is not from 1 to 52 (the earlier weeks a baseline '
                                                     'learns from)', p_weeks));
    END IF;
    IF p_minor IS NOT NULL THEN
        PERFORM _measure.config_number('minor', p_minor, 'above 0 (the minor band, in robust standard deviations)',
                                       p_above => 0);
    END IF;
    IF p_major IS NOT NULL THEN
        PERFORM _measure.config_number('major', p_major, 'above 0 (the major band, in robust standard deviations)',
                                       p_above => 0);
    END IF;
    IF p_relative_floor IS NOT NULL THEN
        PERFORM _measure.config_number('relative_floor', p_relative_floor,
                                       '0 or more (the smallest band as a share of the median)', p_least => 0);
    END IF;
    SELECT coalesce(p_weeks::smallint, v_old.weeks) AS weeks, coalesce(p_minor, v_old.minor) AS minor,
           coalesce(p_major, v_old.major) AS major, coalesce(p_relative_floor, v_old.relative_floor) AS relative_floor
      INTO v_new;
    IF v_new.major <= v_new.minor THEN
        IF p_major IS NOT NULL THEN
            PERFORM _measure.config_fail('major', format('major: %s is not above the minor band (%s)', v_new.major,
                                                         v_new.minor));
        END IF;
        PERFORM _measure.config_fail('minor', format('minor: %s is not below the major band (%s)', v_new.minor,
                                                     v_new.major));
    END IF;
    IF (v_new.weeks, v_new.minor, v_new.major, v_new.relative_floor)
       = (v_default.weeks, v_default.minor, v_default.major, v_default.relative_floor) THEN
        DELETE FROM _measure.analysis_setting WHERE system_id = v_sys;
    ELSE
        INSERT INTO _measure.analysis_setting AS a (system_id, weeks, minor, major, relative_floor)
        VALUES (v_sys, v_new.weeks, v_new.minor, v_new.major, v_new.relative_floor)
        ON CONFLICT (system_id) DO UPDATE
           SET weeks = excluded.weeks, minor = excluded.minor, major = excluded.major,
               relative_floor = excluded.relative_floor;
    END IF;
    RETURN _measure.analysis_config_json(v_sys) || jsonb_build_object(
        'rejudged', CASE WHEN (v_new.weeks, v_new.minor, v_new.major, v_new.relative_floor)
                              = (v_old.weeks, v_old.minor, v_old.major, v_old.relative_floor)
                         THEN jsonb_build_object('systems', 0, 'hours', 0, 'rows', 0)
                         ELSE _measure.analysis_settings_changed(v_sys) END);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.analysis_set(text, integer, double precision, double precision, double precision)
    TO measure_writer;

-- The defaults again for a system (its row removed).
CREATE OR REPLACE FUNCTION _measure.analysis_reset(p_system text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint := _measure.config_system(p_system);
    v_default record;
BEGIN
    SELECT * INTO v_default FROM _measure.analysis_settings(NULL::smallint);
    RETURN _measure.analysis_set(p_system, v_default.weeks, v_default.minor, v_default.major,
                                 v_default.relative_floor);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.analysis_reset(text) TO measure_writer;

-- The floor of a baseline item (the smallest half-width of its minor band, in the item's
-- unit; every system's): the baselines of every system are rebuilt when it changed.
CREATE OR REPLACE FUNCTION _measure.analysis_floor_set(p_entity text, p_item text, p_floor double precision)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_old double precision;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM _measure.baseline_item b WHERE b.entity = p_entity) THEN
        PERFORM _measure.config_fail('entity', format('entity: %s has no baseline items (%s)', coalesce(p_entity, 'null'),
            (SELECT string_agg(DISTINCT b.entity, ', ' ORDER BY b.entity) FROM _measure.baseline_item b)));
    END IF;
    SELECT b.floor INTO v_old FROM _measure.baseline_item b WHERE b.entity = p_entity AND b.item = p_item FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM _measure.config_fail('item', format('item: %s is no baseline item of %s (%s)', coalesce(p_item, 'null'),
            p_entity, (SELECT string_agg(b.item, ', ' ORDER BY b.item) FROM _measure.baseline_item b
                        WHERE b.entity = p_entity)));
    END IF;
    PERFORM _measure.config_number('floor', p_floor, 'above 0 (in the item''s unit)', p_above => 0);
    UPDATE _measure.baseline_item b SET floor = p_floor WHERE b.entity = p_entity AND b.item = p_item;
    RETURN jsonb_build_object('floor', jsonb_build_object('entity', p_entity, 'item', p_item, 'floor', p_floor),
                              'rejudged', CASE WHEN v_old = p_floor THEN jsonb_build_object('systems', 0, 'hours', 0, 'rows', 0)
                                               ELSE _measure.analysis_settings_changed(NULL) END);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.analysis_floor_set(text, text, double precision) TO measure_writer;

-- The limit and weight of an indicator of the health verdict (NULL: as it is; every
-- system's). Weights are 0 to 100 and add up to at most 100 (the score is 100 minus the
-- weights of the indicators present). The verdict reads them when it runs: nothing is rebuilt.
CREATE OR REPLACE FUNCTION _measure.analysis_indicator_set(p_indicator text, p_limit double precision DEFAULT NULL,
                                                           p_weight integer DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_total bigint;
BEGIN
    PERFORM 1 FROM _measure.health_indicator h WHERE h.indicator = p_indicator FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM _measure.config_fail('indicator', format('indicator: %s is no indicator of the health verdict (%s)',
            coalesce(p_indicator, 'null'),
            (SELECT string_agg(h.indicator, ', ' ORDER BY h.ord) FROM _measure.health_indicator h)));
    END IF;
    IF p_limit IS NOT NULL THEN
        PERFORM _measure.config_number('limit', p_limit, '0 or more', p_least => 0);
    END IF;
    IF p_weight IS NOT NULL THEN
        IF p_weight NOT BETWEEN 0 AND 100 THEN
            PERFORM _measure.config_fail('weight', format('weight: %s is not from 0 to 100', p_weight));
        END IF;
        v_total := (SELECT sum(h.weight) FROM _measure.health_indicator h WHERE h.indicator <> p_indicator) + p_weight;
        IF v_total > 100 THEN
            PERFORM _measure.config_fail('weight', format('weight: %s would make the weights add up to %s (at most '
                                                          '100: the score is 100 minus the weights of the indicators '
                                                          'present)', p_weight, v_total));
        END IF;
    END IF;
    UPDATE _measure.health_indicator h
       SET limit_value = coalesce(p_limit, h.limit_value), weight = coalesce(p_weight::smallint, h.weight)
     WHERE h.indicator = p_indicator;
    RETURN (SELECT jsonb_build_object('indicator', jsonb_build_object('indicator', h.indicator, 'limit', h.limit_value,
                                                                      'weight', h.weight, 'symptom', h.symptom),
                                      'weights', (SELECT sum(x.weight) FROM _measure.health_indicator x))
              FROM _measure.health_indicator h WHERE h.indicator = p_indicator);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.analysis_indicator_set(text, double precision, integer) TO measure_writer;

-- ---------------------------------------------------------------- public views of the calendar

-- Every shift definition: the base shifts (effective_from NULL, every weekday: weekday NULL)
-- and each calendar version's shifts per ISO weekday.
CREATE OR REPLACE VIEW measure.calendar_shift AS
SELECT s.system_name, NULL::date AS effective_from, NULL::smallint AS weekday, ss.shift_no, ss.name,
       ss.begin_time, ss.end_time, ss.crosses_midnight, s.system_id
  FROM _measure.system_shift ss JOIN _measure.system s ON s.system_id = ss.system_id
UNION ALL
SELECT s.system_name, c.effective_from, cs.weekday, cs.shift_no, cs.name, cs.begin_time, cs.end_time,
       cs.end_time <= cs.begin_time, s.system_id
  FROM _measure.calendar c
  JOIN _measure.calendar_shift cs ON cs.calendar_id = c.calendar_id
  JOIN _measure.system s ON s.system_id = c.system_id;
GRANT SELECT ON measure.calendar_shift TO measure_writer, measure_api, measure_reader;
COMMENT ON VIEW measure.calendar_shift IS
    'Shift definitions per system: the base shifts (effective_from NULL, every day) and each calendar version''s shifts per ISO weekday.';

CREATE OR REPLACE VIEW measure.holiday AS
SELECT s.system_name, h.day, h.name,
       (SELECT c.holiday_shift FROM _measure.calendar c
         WHERE c.system_id = h.system_id AND c.effective_from <= h.day
         ORDER BY c.effective_from DESC LIMIT 1) AS shift_no,
       s.system_id
  FROM _measure.holiday h JOIN _measure.system s ON s.system_id = h.system_id;
GRANT SELECT ON measure.holiday TO measure_writer, measure_api, measure_reader;
COMMENT ON VIEW measure.holiday IS
    'Holidays per system; shift_no: the holiday shift their hours belong to (NULL: no shift).';

-- ---------------------------------------------------------------- for the API's admin scope

-- The API (role measure_api) changes configuration only through these; the admin scope of its
-- tokens is checked by the API (api/auth.py, api/configuration/).
DO $api$
DECLARE
    f record;
BEGIN
    FOR f IN SELECT * FROM (VALUES
        ('system_info(p_system text)', 'TABLE (system_name text, system_number smallint, time_zone text, '
            'os_version text, cpu_types jsonb, collector text, measurements bigint, first_hour timestamptz, '
            'last_hour timestamptz, calendars bigint, holidays bigint, thresholds bigint, created_at timestamptz)',
         'STABLE', 'SELECT * FROM _measure.system_info(CASE WHEN p_system IS NULL THEN NULL '
                   'ELSE _measure.config_system(p_system) END)'),
        ('system_add(p_name text, p_number integer, p_time_zone text, p_os_version text, p_cpu_types jsonb)', 'text',
         'VOLATILE', 'SELECT _measure.system_add(p_name, p_number, p_time_zone, p_os_version, p_cpu_types)'),
        ('system_set(p_system text, p_changes jsonb)', 'jsonb', 'VOLATILE',
         'SELECT _measure.system_set(p_system, p_changes)'),
        ('system_remove(p_system text)', 'text', 'VOLATILE', 'SELECT _measure.system_remove(p_system)'),
        ('calendar_show(p_system text)', 'jsonb', 'STABLE', 'SELECT _measure.calendar_show(p_system)'),
        ('calendar_set(p_system text, p_from date, p_shifts jsonb, p_holiday_shift integer, p_holiday_name text)',
         'jsonb', 'VOLATILE',
         'SELECT _measure.calendar_set(p_system, p_from, p_shifts, p_holiday_shift, p_holiday_name)'),
        ('calendar_remove(p_system text, p_from date)', 'jsonb', 'VOLATILE',
         'SELECT _measure.calendar_remove(p_system, p_from)'),
        ('holiday_set(p_system text, p_day date, p_name text)', 'jsonb', 'VOLATILE',
         'SELECT _measure.holiday_set(p_system, p_day, p_name)'),
        ('holiday_remove(p_system text, p_day date)', 'jsonb', 'VOLATILE',
         'SELECT _measure.holiday_remove(p_system, p_day)'),
        ('threshold_list(p_system text)', 'TABLE (system_name text, entity text, item text, operator text, '
            'shift_no smallint, limit_value numeric, enabled boolean, help text, in_force boolean, source text)',
         'STABLE', 'SELECT * FROM _measure.threshold_list(p_system)'),
        ('threshold_set(p_system text, p_entity text, p_item text, p_operator text, p_limit numeric, p_shift integer, '
            'p_enabled boolean, p_help text)', 'jsonb', 'VOLATILE',
         'SELECT _measure.threshold_set(p_system, p_entity, p_item, p_operator, p_limit, p_shift, p_enabled, p_help)'),
        ('threshold_remove(p_system text, p_entity text, p_item text, p_operator text, p_shift integer)', 'jsonb',
         'VOLATILE', 'SELECT _measure.threshold_remove(p_system, p_entity, p_item, p_operator, p_shift)'),
        ('analysis_show(p_system text)', 'jsonb', 'STABLE', 'SELECT _measure.analysis_show(p_system)'),
        ('analysis_set(p_system text, p_weeks integer, p_minor double precision, p_major double precision, '
            'p_relative_floor double precision)', 'jsonb', 'VOLATILE',
         'SELECT _measure.analysis_set(p_system, p_weeks, p_minor, p_major, p_relative_floor)'),
        ('analysis_reset(p_system text)', 'jsonb', 'VOLATILE', 'SELECT _measure.analysis_reset(p_system)'),
        ('analysis_floor_set(p_entity text, p_item text, p_floor double precision)', 'jsonb', 'VOLATILE',
         'SELECT _measure.analysis_floor_set(p_entity, p_item, p_floor)'),
        ('analysis_indicator_set(p_indicator text, p_limit double precision, p_weight integer)', 'jsonb', 'VOLATILE',
         'SELECT _measure.analysis_indicator_set(p_indicator, p_limit, p_weight)')
        ) AS x (sig, ret, vol, body) LOOP
        EXECUTE format('CREATE OR REPLACE FUNCTION measure.config_%s RETURNS %s LANGUAGE sql %s SECURITY DEFINER '
                       'SET search_path = pg_catalog, pg_temp AS %L', f.sig, f.ret, f.vol, f.body);
        EXECUTE format('REVOKE ALL ON FUNCTION measure.config_%s FROM PUBLIC', regexp_replace(f.sig, ' p_\w+', '', 'g'));
        EXECUTE format('GRANT EXECUTE ON FUNCTION measure.config_%s TO measure_api, measure_writer',
                       regexp_replace(f.sig, ' p_\w+', '', 'g'));
    END LOOP;
END
$api$;
