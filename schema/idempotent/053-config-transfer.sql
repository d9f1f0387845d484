-- 053-config-transfer: a system's configuration as one JSON document, out with its data
-- (`measuredb export -o FOLDER` writes configuration.json beside the interval records; GET
-- /admin/configuration) and back in (`measuredb import FOLDER`, in the import's one
-- transaction before the data; PUT /admin/configuration), so that a round trip gives every
-- report as the source did (README "Bring your own data"; core/configuration.py).
--
-- The document (version 1):
--   {"format": "measuredb configuration", "version": 1,
--    "defaults": {"shifts":     [{"shift_no", "name", "begin", "end"}],
--                 "thresholds": [{"entity", "item", "operator", "shift", "limit", "enabled", "help"}],
--                 "components": [{"priority", "match_on", "pattern", "component"}],
--                 "baseline_floors": [{"entity", "item", "floor"}],
--                 "health_indicators": [{"indicator", "limit", "weight"}]},
--    "systems": [{"name", "number", "time_zone", "os_version", "cpu_types": [{"cpu", "cpu_type"}],
--                 "shifts": null (the defaults) or its own base shifts,
--                 "calendars": [{"effective_from", "holiday_shift", "holiday_name",
--                                "shifts": [{"shift_no", "name", "weekdays", "begin", "end"}]}],
--                 "holidays": [{"day", "name"}],
--                 "thresholds": [its own rows], "components": [its own rows],
--                 "analysis": {"weeks", "minor", "major", "relative_floor"}}]}
--
-- (A document without "analysis", "baseline_floors" or "health_indicators" is read as before:
-- nothing of the automatic analysis is set.)
--
-- Importing is additive and decided per system, never by changing the target's defaults
-- (other systems read them): a system missing from the target is created; one that exists
-- must have the same time zone. Its own calendar versions, holidays, thresholds and component
-- rows are set (a target's rows of the same key are replaced, others kept). Where the export's
-- defaults differ from the target's, the export's become the system's own rows (a default
-- threshold the target has and the export has not is switched off for the system), so the
-- system reports as it did in the source; each such case is a note in the answer. Base shifts
-- that differ are written as the system's own while it has no data yet; after that they are
-- a calendar version's job (`measuredb calendar set`), and the import refuses with that advice.
-- A system's analysis settings (the ones it takes, its own or the defaults) are set where they
-- differ from what it takes here, which judges its stored hours again (none yet when the
-- import brings its data). The baseline floors and health indicators apply to every system
-- and have no per-system rows: where the export's differ, the answer says so in a note and
-- leaves them (`measuredb analysis floor | indicator` changes them for every system).

-- ---------------------------------------------------------------- out

CREATE OR REPLACE FUNCTION _measure.config_shifts_json(p_system smallint)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('shift_no', sh.shift_no, 'name', sh.name,
                                                 'begin', to_char(sh.begin_time, 'HH24:MI'),
                                                 'end', to_char(sh.end_time, 'HH24:MI'))
                              ORDER BY sh.shift_no), '[]'::jsonb)
      FROM _measure.shift sh WHERE sh.system_id IS NOT DISTINCT FROM p_system
$$;
GRANT EXECUTE ON FUNCTION _measure.config_shifts_json(smallint) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.config_thresholds_json(p_system smallint)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('entity', t.entity, 'item', t.item, 'operator', t.operator,
                                                 'shift', t.shift_no, 'limit', t.limit_value,
                                                 'enabled', t.enabled, 'help', t.help)
                              ORDER BY t.entity, t.item, t.operator, t.shift_no NULLS FIRST), '[]'::jsonb)
      FROM _measure.threshold t WHERE t.system_id IS NOT DISTINCT FROM p_system
$$;
GRANT EXECUTE ON FUNCTION _measure.config_thresholds_json(smallint) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.config_components_json(p_system smallint)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('priority', m.priority, 'match_on', m.match_on,
                                                 'pattern', m.pattern, 'component', m.component)
                              ORDER BY m.priority, m.component_map_id), '[]'::jsonb)
      FROM _measure.component_map m WHERE m.system_id IS NOT DISTINCT FROM p_system
$$;
GRANT EXECUTE ON FUNCTION _measure.config_components_json(smallint) TO measure_writer;

-- The document of the named systems (NULL: every system).
CREATE OR REPLACE FUNCTION _measure.config_export(p_systems text[] DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_ids smallint[];
BEGIN
    IF p_systems IS NULL THEN
        v_ids := ARRAY(SELECT system_id FROM _measure.system ORDER BY system_name);
    ELSE
        v_ids := ARRAY(SELECT _measure.config_system(n) FROM unnest(p_systems) n);
    END IF;
    RETURN jsonb_build_object(
        'format', 'measuredb configuration', 'version', 1,
        'defaults', jsonb_build_object('shifts', _measure.config_shifts_json(NULL),
                                       'thresholds', _measure.config_thresholds_json(NULL),
                                       'components', _measure.config_components_json(NULL),
                                       'baseline_floors', (
                                           SELECT coalesce(jsonb_agg(jsonb_build_object('entity', b.entity,
                                                      'item', b.item, 'floor', b.floor) ORDER BY b.entity, b.item),
                                                      '[]'::jsonb)
                                             FROM _measure.baseline_item b),
                                       'health_indicators', (
                                           SELECT coalesce(jsonb_agg(jsonb_build_object('indicator', h.indicator,
                                                      'limit', h.limit_value, 'weight', h.weight) ORDER BY h.ord),
                                                      '[]'::jsonb)
                                             FROM _measure.health_indicator h)),
        'systems', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                       'name', s.system_name, 'number', s.system_number, 'time_zone', s.time_zone,
                       'os_version', s.os_version, 'cpu_types', i.cpu_types,
                       'shifts', CASE WHEN EXISTS (SELECT 1 FROM _measure.shift sh WHERE sh.system_id = s.system_id)
                                      THEN _measure.config_shifts_json(s.system_id) END,
                       'calendars', coalesce((
                           SELECT jsonb_agg(v - 'until' || jsonb_build_object('shifts', (
                                      SELECT coalesce(jsonb_agg(x - 'crosses_midnight'), '[]'::jsonb)
                                        FROM jsonb_array_elements(v->'shifts') x)))
                             FROM jsonb_array_elements(c->'versions') v), '[]'::jsonb),
                       'holidays', c->'holidays',
                       'thresholds', _measure.config_thresholds_json(s.system_id),
                       'components', _measure.config_components_json(s.system_id),
                       'analysis', (SELECT to_jsonb(a) FROM _measure.analysis_settings(s.system_id) a))
                   ORDER BY s.system_name)
              FROM _measure.system s
              JOIN _measure.system_info() i ON i.system_name = s.system_name
             CROSS JOIN LATERAL _measure.calendar_show(s.system_name) c
             WHERE s.system_id = ANY (v_ids)), '[]'::jsonb));
END
$$;
GRANT EXECUTE ON FUNCTION _measure.config_export(text[]) TO measure_writer;

-- ---------------------------------------------------------------- in

-- Run one step of the import; a mistake it raises names where in the document it is
-- (systems[0].calendars[1].shifts[0].begin: ...).
CREATE OR REPLACE FUNCTION _measure.config_step(p_where text, p_sql text, p_args text[])
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_result jsonb;
    v_state text;
    v_column text;
    v_message text;
    v_hint text;
BEGIN
    EXECUTE p_sql INTO v_result USING p_args[1], p_args[2], p_args[3], p_args[4], p_args[5], p_args[6], p_args[7],
                                      p_args[8];
    RETURN v_result;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_column = COLUMN_NAME, v_message = MESSAGE_TEXT,
                            v_hint = PG_EXCEPTION_HINT;
    IF v_state IN ('22023', '22P02', '22007', '22008', '22003', 'P0002', '23505', '23514') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
              COLUMN = p_where || CASE WHEN coalesce(v_column, '') = '' THEN '' ELSE '.' || v_column END,
              MESSAGE = p_where || ': ' || v_message, HINT = coalesce(v_hint, '');
    END IF;
    RAISE;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.config_step(text, text, text[]) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.config_list(p_doc jsonb, p_key text, p_where text)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_doc->p_key IS NULL OR jsonb_typeof(p_doc->p_key) = 'null' THEN
        RETURN '[]'::jsonb;
    END IF;
    IF jsonb_typeof(p_doc->p_key) <> 'array' THEN
        PERFORM _measure.config_fail(p_where || p_key, format('%s%s: give a list', p_where, p_key));
    END IF;
    RETURN p_doc->p_key;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.config_list(jsonb, text, text) TO measure_writer;

-- Shift lists compared as sets ({"shift_no", "name", "begin", "end"}).
CREATE OR REPLACE FUNCTION _measure.config_same_shifts(a jsonb, b jsonb)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT (SELECT coalesce(array_agg(format('%s|%s|%s|%s', x->>'shift_no', coalesce(x->>'name', ''),
                                             x->>'begin', x->>'end') ORDER BY 1), '{}')
              FROM jsonb_array_elements(a) x)
         = (SELECT coalesce(array_agg(format('%s|%s|%s|%s', x->>'shift_no', coalesce(x->>'name', ''),
                                             x->>'begin', x->>'end') ORDER BY 1), '{}')
              FROM jsonb_array_elements(b) x)
$$;
GRANT EXECUTE ON FUNCTION _measure.config_same_shifts(jsonb, jsonb) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.config_import(p_doc jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    s jsonb;
    e jsonb;
    i integer;
    j integer;
    w text;
    v_name text;
    v_sys smallint;
    v_zone text;
    v_created boolean;
    v_defaults jsonb;
    v_shifts jsonb;
    v_counts jsonb;
    v_notes text[] := '{}';
    v_systems jsonb := '[]';
    v_analysis jsonb;
    v_result jsonb;
    r record;
BEGIN
    IF p_doc IS NULL OR jsonb_typeof(p_doc) <> 'object'
       OR p_doc->>'format' IS DISTINCT FROM 'measuredb configuration' THEN
        PERFORM _measure.config_fail('format', 'format: not a measuredb configuration (written by measuredb export '
                                               '-o FOLDER as configuration.json, or GET /admin/configuration)');
    END IF;
    IF p_doc->'version' IS DISTINCT FROM '1'::jsonb THEN
        PERFORM _measure.config_fail('version', format('version: %s is not a version this measuredb reads (1)',
                                                       coalesce(p_doc->'version', 'null'::jsonb)));
    END IF;
    v_defaults := coalesce(p_doc->'defaults', '{}'::jsonb);
    IF jsonb_typeof(v_defaults) <> 'object' THEN
        PERFORM _measure.config_fail('defaults', 'defaults: give {"shifts", "thresholds", "components", ...}');
    END IF;
    PERFORM _measure.config_list(v_defaults, k, 'defaults.')
       FROM unnest(ARRAY['shifts', 'thresholds', 'components', 'baseline_floors', 'health_indicators']) k;

    FOR s, i IN SELECT x.value, x.ordinality - 1 FROM jsonb_array_elements(_measure.config_list(p_doc, 'systems', ''))
                                                 WITH ORDINALITY x LOOP
        w := format('systems[%s]', i);
        IF jsonb_typeof(s) <> 'object' THEN
            PERFORM _measure.config_fail(w, w || ': give {"name", "number", "time_zone", ...}');
        END IF;
        v_name := _measure.system_name_of(s->>'name');
        v_counts := jsonb_build_object('calendars', 0, 'holidays', 0, 'thresholds', 0, 'components', 0);
        SELECT system_id, time_zone INTO v_sys, v_zone FROM _measure.system WHERE system_name = v_name;
        v_created := v_sys IS NULL;
        IF v_created THEN
            PERFORM _measure.config_step(w, 'SELECT to_jsonb(_measure.system_add($1, $2::integer, $3, $4, $5::jsonb))',
                                         ARRAY[s->>'name', s->>'number', s->>'time_zone', coalesce(s->>'os_version', 'B30'),
                                         coalesce(s->'cpu_types', '[]')::text]);
            SELECT system_id, time_zone INTO v_sys, v_zone FROM _measure.system WHERE system_name = v_name;
        ELSIF v_zone IS DISTINCT FROM s->>'time_zone' THEN
            PERFORM _measure.config_fail(w || '.time_zone', format(
                '%s.time_zone: %s exists here with the time zone %s, the export says %s (its shift days would '
                'differ): change one (measuredb system set %s --time-zone ...) and import again',
                w, v_name, v_zone, coalesce(s->>'time_zone', 'null'), v_name));
        END IF;

        -- base shifts: what the system takes in the source, against what it takes here
        v_shifts := CASE WHEN jsonb_typeof(s->'shifts') = 'array' THEN s->'shifts'
                         ELSE _measure.config_list(v_defaults, 'shifts', 'defaults.') END;
        IF jsonb_array_length(v_shifts) > 0 AND NOT _measure.config_same_shifts(v_shifts, (
                SELECT coalesce(jsonb_agg(jsonb_build_object('shift_no', ss.shift_no, 'name', ss.name,
                                                             'begin', to_char(ss.begin_time, 'HH24:MI'),
                                                             'end', to_char(ss.end_time, 'HH24:MI'))), '[]')
                  FROM _measure.system_shift ss WHERE ss.system_id = v_sys)) THEN
            IF (SELECT lo FROM _measure.hour_span(v_sys)) IS NOT NULL THEN
                PERFORM _measure.config_fail(w || '.shifts', format(
                    '%s.shifts: %s has data here and other base shifts than the export''s: give it a calendar '
                    'version with the export''s shifts (measuredb calendar set %s --from DAY ...) and import '
                    'without them', w, v_name, v_name));
            END IF;
            DELETE FROM _measure.shift WHERE system_id = v_sys;
            FOR e, j IN SELECT x.value, x.ordinality - 1 FROM jsonb_array_elements(v_shifts) WITH ORDINALITY x LOOP
                PERFORM _measure.config_step(format('%s.shifts[%s]', w, j),
                    'INSERT INTO _measure.shift (system_id, shift_no, begin_time, end_time, name) '
                    'VALUES ($1::smallint, $2::smallint, $3::time, $4::time, coalesce($5, '''')) RETURNING NULL::jsonb',
                    ARRAY[v_sys::text, e->>'shift_no', e->>'begin', e->>'end', e->>'name']);
            END LOOP;
            IF NOT (jsonb_typeof(s->'shifts') = 'array') THEN
                v_notes := v_notes || format('%s: the export''s default shifts differ from these; they are %s''s own',
                                             v_name, v_name);
            END IF;
        END IF;

        FOR e, j IN SELECT x.value, x.ordinality - 1
                      FROM jsonb_array_elements(_measure.config_list(s, 'calendars', w || '.')) WITH ORDINALITY x LOOP
            PERFORM _measure.config_step(format('%s.calendars[%s]', w, j),
                'SELECT _measure.calendar_set($1, $2::date, $3::jsonb, $4::integer, coalesce($5, ''holiday''))',
                ARRAY[v_name, e->>'effective_from', coalesce(e->'shifts', 'null')::text, e->>'holiday_shift',
                e->>'holiday_name']);
            v_counts := jsonb_set(v_counts, '{calendars}', to_jsonb(j + 1));
        END LOOP;
        FOR e, j IN SELECT x.value, x.ordinality - 1
                      FROM jsonb_array_elements(_measure.config_list(s, 'holidays', w || '.')) WITH ORDINALITY x LOOP
            PERFORM _measure.config_step(format('%s.holidays[%s]', w, j),
                'SELECT _measure.holiday_set($1, $2::date, coalesce($3, ''''))', ARRAY[v_name, e->>'day', e->>'name']);
            v_counts := jsonb_set(v_counts, '{holidays}', to_jsonb(j + 1));
        END LOOP;

        -- thresholds: its own, then the export's defaults where they differ from these
        FOR e, j IN SELECT x.value, x.ordinality - 1
                      FROM jsonb_array_elements(_measure.config_list(s, 'thresholds', w || '.')) WITH ORDINALITY x LOOP
            PERFORM _measure.config_step(format('%s.thresholds[%s]', w, j),
                'SELECT _measure.threshold_set($1, $2, $3, $4, $5::numeric, $6::integer, coalesce($7::boolean, true), $8)',
                ARRAY[v_name, e->>'entity', e->>'item', e->>'operator', e->>'limit', e->>'shift', e->>'enabled', e->>'help']);
            v_counts := jsonb_set(v_counts, '{thresholds}', to_jsonb(j + 1));
        END LOOP;
        FOR e, j IN SELECT x.value, x.ordinality - 1
                      FROM jsonb_array_elements(_measure.config_list(v_defaults, 'thresholds', 'defaults.'))
                           WITH ORDINALITY x LOOP
            PERFORM _measure.config_step(format('defaults.thresholds[%s]', j),
                'SELECT jsonb_build_array($1::numeric, $2::smallint, $3::boolean)',
                ARRAY[e->>'limit', e->>'shift', e->>'enabled']);
            CONTINUE WHEN EXISTS (SELECT 1 FROM _measure.threshold t
                                   WHERE t.entity = e->>'entity' AND t.item = e->>'item' AND t.operator = e->>'operator'
                                     AND t.shift_no IS NOT DISTINCT FROM (e->>'shift')::smallint
                                     AND (t.system_id = v_sys
                                          OR (t.system_id IS NULL AND t.limit_value = (e->>'limit')::numeric
                                              AND t.enabled = coalesce((e->>'enabled')::boolean, true))));
            PERFORM _measure.config_step(format('defaults.thresholds[%s]', j),
                'SELECT _measure.threshold_set($1, $2, $3, $4, $5::numeric, $6::integer, coalesce($7::boolean, true), $8)',
                ARRAY[v_name, e->>'entity', e->>'item', e->>'operator', e->>'limit', e->>'shift', e->>'enabled', e->>'help']);
            v_notes := v_notes || format('%s: the export''s default threshold %s %s %s %s%s differs from this '
                                         'database''s; it is %s''s own', v_name, upper(e->>'entity'), e->>'item',
                                         e->>'operator', e->>'limit',
                                         coalesce(' (shift ' || (e->>'shift') || ')', ''), v_name);
        END LOOP;
        FOR r IN SELECT t.* FROM _measure.threshold t
                  WHERE t.system_id IS NULL AND t.enabled
                    AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(_measure.config_list(v_defaults, 'thresholds', 'defaults.')) x
                                     WHERE x->>'entity' = t.entity AND x->>'item' = t.item AND x->>'operator' = t.operator
                                       AND (x->>'shift')::smallint IS NOT DISTINCT FROM t.shift_no)
                    AND NOT EXISTS (SELECT 1 FROM _measure.threshold o
                                     WHERE o.system_id = v_sys AND o.entity = t.entity AND o.item = t.item
                                       AND o.operator = t.operator AND o.shift_no IS NOT DISTINCT FROM t.shift_no) LOOP
            PERFORM _measure.threshold_set(v_name, r.entity, r.item, r.operator, r.limit_value, r.shift_no, false, r.help);
            v_notes := v_notes || format('%s: this database''s default threshold %s %s %s %s is not in the export; '
                                         'it is switched off for %s', v_name, upper(r.entity), r.item, r.operator,
                                         r.limit_value, v_name);
        END LOOP;

        -- component rows: its own, then the export's defaults this database has not
        FOR e, j IN SELECT x.value, x.ordinality - 1
                      FROM jsonb_array_elements(_measure.config_list(s, 'components', w || '.')) WITH ORDINALITY x LOOP
            PERFORM _measure.config_step(format('%s.components[%s]', w, j),
                'SELECT _measure.component_set($1, $2, $3, $4, coalesce($5::integer, 100))',
                ARRAY[v_name, e->>'match_on', e->>'pattern', e->>'component', e->>'priority']);
            v_counts := jsonb_set(v_counts, '{components}', to_jsonb(j + 1));
        END LOOP;
        FOR e, j IN SELECT x.value, x.ordinality - 1
                      FROM jsonb_array_elements(_measure.config_list(v_defaults, 'components', 'defaults.'))
                           WITH ORDINALITY x LOOP
            PERFORM _measure.config_step(format('defaults.components[%s]', j), 'SELECT to_jsonb($1::integer)',
                                         ARRAY[e->>'priority']);
            CONTINUE WHEN EXISTS (SELECT 1 FROM _measure.component_map m
                                   WHERE m.match_on = e->>'match_on' AND m.pattern = upper(btrim(e->>'pattern'))
                                     AND (m.system_id = v_sys
                                          OR (m.system_id IS NULL AND m.component = e->>'component'
                                              AND m.priority = coalesce((e->>'priority')::integer, 100))));
            PERFORM _measure.config_step(format('defaults.components[%s]', j),
                'SELECT _measure.component_set($1, $2, $3, $4, coalesce($5::integer, 100))',
                ARRAY[v_name, e->>'match_on', e->>'pattern', e->>'component', e->>'priority']);
            v_notes := v_notes || format('%s: the export''s default component row %s %s differs from this '
                                         'database''s; it is %s''s own', v_name, e->>'match_on', e->>'pattern', v_name);
        END LOOP;
        FOR r IN SELECT m.* FROM _measure.component_map m
                  WHERE m.system_id IS NULL
                    AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(_measure.config_list(v_defaults, 'components', 'defaults.')) x
                                     WHERE x->>'match_on' = m.match_on AND upper(btrim(x->>'pattern')) = m.pattern) LOOP
            v_notes := v_notes || format('%s: this database''s default component row %s %s (%s) is not in the export '
                                         'and applies to %s too (measuredb component remove --match-on %s %s, if it '
                                         'should not)', v_name, r.match_on, r.pattern, r.component, v_name,
                                         r.match_on, r.pattern);
        END LOOP;
        -- the automatic analysis's settings: the ones it takes in the source, where they differ
        IF jsonb_typeof(s->'analysis') = 'object' THEN
            v_analysis := (SELECT to_jsonb(a) FROM _measure.analysis_settings(v_sys) a);
            IF EXISTS (SELECT 1 FROM jsonb_each(s->'analysis') x
                        WHERE x.key IN ('weeks', 'minor', 'major', 'relative_floor')
                          AND x.value IS DISTINCT FROM v_analysis->x.key) THEN
                v_result := _measure.config_step(w || '.analysis',
                    'SELECT _measure.analysis_set($1, $2::integer, $3::float8, $4::float8, $5::float8)',
                    ARRAY[v_name, s->'analysis'->>'weeks', s->'analysis'->>'minor', s->'analysis'->>'major',
                          s->'analysis'->>'relative_floor']);
                v_analysis := (SELECT to_jsonb(a) FROM _measure.analysis_settings(v_sys) a);
                v_notes := v_notes || format('%s: analysis settings weeks %s, minor %s, major %s, relative_floor %s '
                                             'set (%s hours judged again)', v_name, v_analysis->>'weeks',
                                             v_analysis->>'minor', v_analysis->>'major', v_analysis->>'relative_floor',
                                             v_result->'rejudged'->>'hours');
            END IF;
        ELSIF s ? 'analysis' AND jsonb_typeof(s->'analysis') <> 'null' THEN
            PERFORM _measure.config_fail(w || '.analysis', w || '.analysis: give {"weeks", "minor", "major", '
                                                                '"relative_floor"}');
        END IF;
        v_systems := v_systems || jsonb_build_array(jsonb_build_object('name', v_name, 'created', v_created) || v_counts);
    END LOOP;

    -- the floors and indicators every system takes: said where they differ, not applied
    FOR e IN SELECT x.value FROM jsonb_array_elements(_measure.config_list(v_defaults, 'baseline_floors', 'defaults.')) x
              WHERE NOT EXISTS (SELECT 1 FROM _measure.baseline_item b WHERE b.entity = x.value->>'entity'
                                   AND b.item = x.value->>'item' AND to_jsonb(b.floor) = x.value->'floor') LOOP
        v_notes := v_notes || format('the export''s baseline floor of %s %s (%s) differs from this database''s (%s); '
                                     'not applied: it applies to every system (measuredb analysis floor %s %s %s)',
                                     e->>'entity', e->>'item', e->>'floor',
                                     coalesce((SELECT b.floor::text FROM _measure.baseline_item b
                                                WHERE b.entity = e->>'entity' AND b.item = e->>'item'), 'none'),
                                     e->>'entity', e->>'item', e->>'floor');
    END LOOP;
    FOR e IN SELECT x.value FROM jsonb_array_elements(_measure.config_list(v_defaults, 'health_indicators', 'defaults.')) x
              WHERE NOT EXISTS (SELECT 1 FROM _measure.health_indicator h WHERE h.indicator = x.value->>'indicator'
                                   AND to_jsonb(h.limit_value) = x.value->'limit' AND to_jsonb(h.weight) = x.value->'weight') LOOP
        v_notes := v_notes || format('the export''s health indicator %s (limit %s, weight %s) differs from this '
                                     'database''s (%s); not applied: it applies to every system (measuredb analysis '
                                     'indicator %s --limit %s --weight %s)',
                                     e->>'indicator', e->>'limit', e->>'weight',
                                     coalesce((SELECT format('limit %s, weight %s', h.limit_value, h.weight)
                                                 FROM _measure.health_indicator h WHERE h.indicator = e->>'indicator'),
                                              'none'),
                                     e->>'indicator', e->>'limit', e->>'weight');
    END LOOP;
    RETURN jsonb_build_object('systems', v_systems, 'notes', to_jsonb(v_notes));
END
$$;
GRANT EXECUTE ON FUNCTION _measure.config_import(jsonb) TO measure_writer;

-- for the API's admin scope (and the command line under the collector's role)
CREATE OR REPLACE FUNCTION measure.config_export(p_systems text[])
RETURNS jsonb LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT _measure.config_export(p_systems)
$$;
CREATE OR REPLACE FUNCTION measure.config_import(p_doc jsonb)
RETURNS jsonb LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT _measure.config_import(p_doc)
$$;
REVOKE ALL ON FUNCTION measure.config_export(text[]), measure.config_import(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.config_export(text[]), measure.config_import(jsonb) TO measure_api, measure_writer;
