-- 035-meascom: what MEASCOM needs to run the same as the owner role and as the API role
-- (POST /meascom, api/meascom/). measure_api has no privilege on schema _measure, and the
-- interpreter (collector/meascom/) never names it: it reads the measure.* views (measurement,
-- system, collector_heartbeat, entity, entity_type, interval_record; LIST through
-- collector/measure/read.py) and writes only through SECURITY DEFINER functions:
-- measure.create_measurement / stop_measurement (START / STOP), measure.submit_request /
-- request_answer (STATUS, LISTACTIVE; 030-api.sql), and the ones below: FORMAT STRUCTURED
-- (LIST/LISTALL with a LOADID) and tidying up a request it has finished with.

-- Structured records (schema/020-structured.sql), readable like the other measure.* views.
CREATE OR REPLACE VIEW measure.structured_record AS
SELECT r.structured_id, r.loadid, s.system_name, r.system_id, t.entity, r.type_code,
       r.measurement_id, r.entity_id, r.from_at, r.to_at, r.delta_us, r.counters, r.written_at
  FROM _measure.structured_record r
  JOIN _measure.system s USING (system_id)
  JOIN _measure.entity_type t USING (type_code);
GRANT SELECT ON measure.structured_record TO measure_writer, measure_api, measure_reader;

-- Append one structured record (MEASCOM LIST/LISTALL, FORMAT STRUCTURED): raw values of one
-- entity (entity_id NULL: a TOTALS record) of a measurement of that system.
CREATE OR REPLACE FUNCTION measure.append_structured_record(
    p_loadid text, p_system_id smallint, p_type_code smallint, p_measurement_id integer,
    p_entity_id bigint, p_from_at timestamptz, p_to_at timestamptz, p_delta_us bigint,
    p_counters bigint[])
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_id bigint;
BEGIN
    IF p_loadid IS NOT NULL AND p_loadid !~ '^[A-Z0-9$#^_-]{1,8}$' THEN
        RAISE EXCEPTION 'LOADID % must be 1-8 letters, digits or $#^_-', p_loadid
            USING ERRCODE = '22023', COLUMN = 'loadid';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM _measure.measurement
                    WHERE measurement_id = p_measurement_id AND system_id = p_system_id) THEN
        RAISE EXCEPTION 'no measurement % on system %', p_measurement_id, p_system_id
            USING ERRCODE = 'P0002', COLUMN = 'measurement_id';
    END IF;
    IF p_entity_id IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM _measure.entity
            WHERE entity_id = p_entity_id AND system_id = p_system_id AND type_code = p_type_code) THEN
        RAISE EXCEPTION 'no entity % of type % on system %', p_entity_id, p_type_code, p_system_id
            USING ERRCODE = 'P0002', COLUMN = 'entity_id';
    END IF;
    IF p_to_at <= p_from_at OR p_delta_us <= 0 THEN
        RAISE EXCEPTION 'a structured record needs to > from and a positive elapsed time'
            USING ERRCODE = '22023', COLUMN = 'to_at';
    END IF;
    INSERT INTO _measure.structured_record (loadid, system_id, type_code, measurement_id, entity_id,
                                            from_at, to_at, delta_us, counters)
    VALUES (p_loadid, p_system_id, p_type_code, p_measurement_id, p_entity_id, p_from_at, p_to_at,
            p_delta_us, p_counters)
    RETURNING structured_id INTO v_id;
    RETURN v_id;
END
$$;
REVOKE ALL ON FUNCTION measure.append_structured_record(text, smallint, smallint, integer, bigint,
    timestamptz, timestamptz, bigint, bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.append_structured_record(text, smallint, smallint, integer, bigint,
    timestamptz, timestamptz, bigint, bigint[]) TO measure_writer, measure_api;

-- Forget a control request (MEASCOM tidies up after the collector answered, or after it gave
-- up waiting: a request nobody waits for any more is not answered later). Unknown id: nothing.
CREATE OR REPLACE FUNCTION measure.forget_request(p_id bigint)
RETURNS void LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DELETE FROM _measure.control_request WHERE request_id = p_id
$$;
REVOKE ALL ON FUNCTION measure.forget_request(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.forget_request(bigint) TO measure_writer, measure_api;
