-- 052-components: which process is which component of the transaction-resource report (ATM
-- article, Table 4/5: TMF and disc processes, line handlers, PATHWAY TCPs, HLS, application
-- servers, other), as configuration like shifts and thresholds: `measuredb component …`
-- (cli/component.py) and /admin/components (api/configuration/) through core/configuration.py.
--
-- _measure.component_map (010-tiers.sql) holds the rows: the first whose SQL LIKE pattern
-- matches the upper-case program file name or process name, by priority, decides; a system's
-- own rows and the defaults (system NULL) are read together. The collector adds a row per
-- PATHWAY server program of its node (collector/registration.py). Nothing is stored from it:
-- the report reads the map when it runs, so a change shows at once.

CREATE OR REPLACE FUNCTION _measure.component_names()
RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['tmf_disc', 'line_handler', 'tcp', 'hls', 'server', 'other']
$$;
GRANT EXECUTE ON FUNCTION _measure.component_names() TO measure_writer;

-- The rows a system takes (its own and the defaults, in the order they are tried), or every
-- stored row (p_system NULL).
CREATE OR REPLACE FUNCTION _measure.component_list(p_system text DEFAULT NULL)
RETURNS TABLE (system_name text, priority smallint, match_on text, pattern text, component text, source text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_sys smallint := CASE WHEN p_system IS NULL THEN NULL ELSE _measure.config_system(p_system) END;
BEGIN
    RETURN QUERY
    SELECT s.system_name, m.priority, m.match_on, m.pattern, m.component,
           CASE WHEN m.system_id IS NULL THEN 'default' ELSE 'system' END
      FROM _measure.component_map m LEFT JOIN _measure.system s ON s.system_id = m.system_id
     WHERE v_sys IS NULL OR m.system_id IS NULL OR m.system_id = v_sys
     ORDER BY CASE WHEN v_sys IS NULL THEN s.system_name END NULLS FIRST, m.priority, m.component_map_id;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.component_list(text) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.component_key(p_match_on text, p_pattern text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_match_on IS NULL OR p_match_on NOT IN ('program_file_name', 'process_name') THEN
        PERFORM _measure.config_fail('match_on', format('match_on: %s is neither program_file_name nor process_name',
                                                        coalesce(p_match_on, 'null')));
    END IF;
    IF p_pattern IS NULL OR btrim(p_pattern) = '' OR length(p_pattern) > 128 THEN
        PERFORM _measure.config_fail('pattern', 'pattern: 1-128 characters, an SQL LIKE pattern ($APPL.%, %.SYSTEM.DP2%)');
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.component_key(text, text) TO measure_writer;

-- Set a row (insert or change its component and priority): of a system, or a default
-- (p_system NULL). Returns the row.
CREATE OR REPLACE FUNCTION _measure.component_set(p_system text, p_match_on text, p_pattern text,
                                                  p_component text, p_priority integer DEFAULT 100)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint := CASE WHEN p_system IS NULL THEN NULL ELSE _measure.config_system(p_system) END;
BEGIN
    PERFORM _measure.component_key(p_match_on, p_pattern);
    IF p_component IS NULL OR p_component <> ALL (_measure.component_names()) THEN
        PERFORM _measure.config_fail('component', format('component: %s is none of %s', coalesce(p_component, 'null'),
                                                         array_to_string(_measure.component_names(), ', ')));
    END IF;
    IF p_priority IS NULL OR p_priority NOT BETWEEN 0 AND 32767 THEN
        PERFORM _measure.config_fail('priority', 'priority: 0 to 32767 (lower is tried first)');
    END IF;
    UPDATE _measure.component_map m SET component = p_component, priority = p_priority
     WHERE m.system_id IS NOT DISTINCT FROM v_sys AND m.match_on = p_match_on AND m.pattern = upper(btrim(p_pattern));
    IF NOT FOUND THEN
        INSERT INTO _measure.component_map (system_id, priority, match_on, pattern, component)
        VALUES (v_sys, p_priority, p_match_on, upper(btrim(p_pattern)), p_component);
    END IF;
    RETURN jsonb_build_object('system', (SELECT system_name FROM _measure.system WHERE system_id = v_sys),
                              'match_on', p_match_on, 'pattern', upper(btrim(p_pattern)),
                              'component', p_component, 'priority', p_priority);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.component_set(text, text, text, text, integer) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.component_remove(p_system text, p_match_on text, p_pattern text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint := CASE WHEN p_system IS NULL THEN NULL ELSE _measure.config_system(p_system) END;
BEGIN
    PERFORM _measure.component_key(p_match_on, p_pattern);
    DELETE FROM _measure.component_map m
     WHERE m.system_id IS NOT DISTINCT FROM v_sys AND m.match_on = p_match_on AND m.pattern = upper(btrim(p_pattern));
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', COLUMN = 'pattern',
              MESSAGE = format('pattern: %s has no component row for %s %s',
                               coalesce(_measure.system_name_of(p_system), 'the default set'), p_match_on,
                               upper(btrim(p_pattern)));
    END IF;
    RETURN jsonb_build_object('system', _measure.system_name_of(p_system), 'match_on', p_match_on,
                              'pattern', upper(btrim(p_pattern)));
END
$$;
GRANT EXECUTE ON FUNCTION _measure.component_remove(text, text, text) TO measure_writer;

-- for the API's admin scope (and the command line under the collector's role), as
-- measure.config_* of 050-config.sql
CREATE OR REPLACE FUNCTION measure.config_component_list(p_system text)
RETURNS TABLE (system_name text, priority smallint, match_on text, pattern text, component text, source text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM _measure.component_list(p_system)
$$;
CREATE OR REPLACE FUNCTION measure.config_component_set(p_system text, p_match_on text, p_pattern text,
                                                        p_component text, p_priority integer)
RETURNS jsonb LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT _measure.component_set(p_system, p_match_on, p_pattern, p_component, p_priority)
$$;
CREATE OR REPLACE FUNCTION measure.config_component_remove(p_system text, p_match_on text, p_pattern text)
RETURNS jsonb LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT _measure.component_remove(p_system, p_match_on, p_pattern)
$$;
REVOKE ALL ON FUNCTION measure.config_component_list(text), measure.config_component_set(text, text, text, text, integer),
    measure.config_component_remove(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.config_component_list(text), measure.config_component_set(text, text, text, text, integer),
    measure.config_component_remove(text, text, text) TO measure_api, measure_writer;
