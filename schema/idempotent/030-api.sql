-- 030-api: what the REST API (role measure_api) may read and the only ways it may change
-- storage. measure_api has no privilege on schema _measure: every change goes through the
-- SECURITY DEFINER functions below (owner = the schema owner), each with a fixed search_path,
-- REVOKE ALL FROM PUBLIC and its GRANT right after it.
--
-- Errors a client can cause are raised with SQLSTATEs the API maps to HTTP statuses:
--   P0002 no_data_found            -> 404 (unknown measurement, system)
--   22023 invalid_parameter_value  -> 422 (bad times, bad kind)
--   55000 object_not_in_prerequisite_state -> 409 (wrong measurement state)
--   23505 unique_violation         -> 409 (a live measurement with that name exists)
-- The message's HINT names the offending field (column = field name).

-- ---------------------------------------------------------------- read side (MEASREAD)

-- Measured entities (one row per CPU, disc path, process, file open ...).
CREATE OR REPLACE VIEW measure.entity AS
SELECT e.entity_id, e.system_id, e.type_code, t.entity, e.key, e.ids, e.cpu, e.first_seen_at
  FROM _measure.entity e JOIN _measure.entity_type t USING (type_code);
GRANT SELECT ON measure.entity TO measure_writer, measure_api, measure_reader;

-- Interval runs as stored (schema/100-interval-runs*.sql): consecutive interval records of one
-- counter record within one UTC hour, counters[i][p] = counter p of interval i.
CREATE OR REPLACE VIEW measure.interval_run AS
SELECT measurement_id, entity_id, record_at, from_at,
       from_at + n * delta_us * INTERVAL '1 microsecond' AS to_at, delta_us, n, closing_kind,
       system_id, type_code, cpu, error, counters
  FROM _measure.interval_run;
GRANT SELECT ON measure.interval_run TO measure_writer, measure_api, measure_reader;

-- Interval (structured) records, one row each as in 1986: counter deltas in catalogue order
-- (value at to_at for snapshot, maxq and maxvalue counters; at from_at for STARTING-…).
-- Initial-value copies are already subtracted (collector/measure/copies.py). Unpacked from the
-- runs (015-runs.sql): for selective reads (a measurement, an entity); product code reads the
-- runs.
CREATE OR REPLACE VIEW measure.interval_record AS
SELECT * FROM _measure.interval_record;
GRANT SELECT ON measure.interval_record TO measure_writer, measure_api, measure_reader;

-- Counter-record copies, cumulative, as MEASCTL took them (copy_kind 1 start, 2 initial
-- value, 3 interval, 4 entity-stop, 5 stop), derived: the copies that close no interval are
-- stored (_measure.extra_copy); the copy closing interval i of a run is its chain's base (the
-- copy that opened the chain's first run of the UTC day) plus the deltas up to i for delta
-- counters (a running sum over the intervals: _measure.copy_accum), interval i's value for
-- level counters, and for STARTING-… snapshots the next interval's (the run's tail after its
-- last one). The same rows the collector copied; NULL counters where no base is known (runs
-- loaded as interval records).
CREATE OR REPLACE FUNCTION _measure.copy_step(p_state bigint[], p_row bigint[], p_base bigint[],
                                              p_delta boolean[])
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_base IS NOT NULL THEN
        p_state := p_base;
    END IF;
    IF p_state IS NULL THEN
        RETURN NULL;
    END IF;
    FOR i IN 1 .. cardinality(p_row) LOOP
        IF p_delta[i] THEN
            p_state[i] := p_state[i] + p_row[i];
        END IF;
    END LOOP;
    RETURN p_state;
END
$$;
CREATE OR REPLACE AGGREGATE _measure.copy_accum(bigint[], bigint[], boolean[]) (
    SFUNC = _measure.copy_step, STYPE = bigint[]);

CREATE OR REPLACE FUNCTION _measure.copy_out(p_state bigint[], p_row bigint[], p_next bigint[], p_tail bigint[],
                                             p_role text[], p_tail_index integer[])
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_out bigint[] := p_row;
BEGIN
    FOR i IN 1 .. cardinality(p_row) LOOP
        v_out[i] := CASE p_role[i] WHEN 'delta' THEN p_state[i]
                                   WHEN 'start' THEN coalesce(p_next[i], p_tail[p_tail_index[i]])
                                   ELSE p_row[i] END;
    END LOOP;
    RETURN v_out;
END
$$;

-- Per entity type, the role of each counter position (delta, level, start; 015-runs.sql).
CREATE OR REPLACE VIEW _measure.counter_roles AS
SELECT type_code, array_agg(role ORDER BY position) AS role, array_agg(role = 'delta' ORDER BY position) AS delta,
       array_agg(tail_index ORDER BY position)::integer[] AS tail_index
  FROM _measure.counter_role GROUP BY type_code;

CREATE OR REPLACE VIEW measure.counter_copy AS
WITH iv AS (
    SELECT r.measurement_id, r.entity_id, r.record_at, r.system_id, r.type_code, r.cpu, r.error, r.from_at,
           g.i, r.n, r.delta_us, r.closing_kind, r.tail, CASE WHEN g.i = 1 THEN r.base END AS base,
           ARRAY(SELECT x FROM unnest(d.c[g.i:g.i][:]) x) AS v,
           CASE WHEN g.i < r.n THEN ARRAY(SELECT x FROM unnest(d.c[g.i + 1:g.i + 1][:]) x) END AS v_next
      FROM _measure.interval_run r
     CROSS JOIN LATERAL (SELECT r.counters || '{}'::bigint[] AS c OFFSET 0) d
     CROSS JOIN LATERAL generate_series(1, r.n) g (i)),
acc AS (
    SELECT iv.*, _measure.copy_accum(iv.v, iv.base, k.delta)
                     OVER (PARTITION BY iv.measurement_id, iv.entity_id, iv.record_at ORDER BY iv.from_at, iv.i) AS state,
           k.role, k.tail_index
      FROM iv JOIN _measure.counter_roles k USING (type_code))
SELECT acc.measurement_id, acc.entity_id, acc.record_at,
       acc.from_at + acc.i * acc.delta_us * INTERVAL '1 microsecond' AS copy_at,
       CASE WHEN acc.i = acc.n THEN acc.closing_kind ELSE 3::smallint END AS copy_kind,
       acc.system_id, acc.type_code, acc.cpu, acc.error,
       _measure.copy_out(acc.state, acc.v, acc.v_next, acc.tail, acc.role, acc.tail_index) AS counters
  FROM acc
UNION ALL
SELECT x.measurement_id, x.entity_id, x.record_at, x.copy_at, x.copy_kind, x.system_id, x.type_code, x.cpu,
       x.error, x.counters
  FROM _measure.extra_copy x;
GRANT SELECT ON measure.counter_copy TO measure_writer, measure_api, measure_reader;

-- ---------------------------------------------------------------- measurements (MEASCONTROL)

CREATE OR REPLACE FUNCTION measure.create_measurement(
    p_system text, p_name text, p_contab jsonb, p_source text,
    p_start_at timestamptz, p_stop_at timestamptz, p_interval_us bigint)
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_system smallint;
    v_id integer;
BEGIN
    IF p_system IS NULL THEN
        SELECT min(system_id) INTO v_system FROM _measure.system HAVING count(*) = 1;
        IF v_system IS NULL THEN
            RAISE EXCEPTION 'no system given and the database holds % systems; name one',
                (SELECT count(*) FROM _measure.system)
                USING ERRCODE = 'P0002', COLUMN = 'system';
        END IF;
    ELSE
        SELECT system_id INTO v_system FROM _measure.system WHERE system_name = upper(p_system);
        IF v_system IS NULL THEN
            RAISE EXCEPTION 'unknown system %', p_system USING ERRCODE = 'P0002', COLUMN = 'system';
        END IF;
    END IF;
    IF p_name IS NULL OR p_name !~* '^[A-Z][A-Z0-9]{0,7}$' THEN
        RAISE EXCEPTION 'measurement name % must be a file name: a letter, then up to 7 letters or digits', p_name
            USING ERRCODE = '22023', COLUMN = 'name';
    END IF;
    IF p_interval_us IS NOT NULL AND p_interval_us < 1000000 THEN
        RAISE EXCEPTION 'interval must be at least 1 second' USING ERRCODE = '22023', COLUMN = 'interval_seconds';
    END IF;
    IF p_stop_at IS NOT NULL AND p_start_at IS NOT NULL AND p_stop_at <= p_start_at THEN
        RAISE EXCEPTION 'stop time % is not after start time %', p_stop_at, p_start_at
            USING ERRCODE = '22023', COLUMN = 'stop_at';
    END IF;
    IF p_stop_at IS NOT NULL AND p_start_at IS NULL THEN
        RAISE EXCEPTION 'a stop time needs a start time' USING ERRCODE = '22023', COLUMN = 'stop_at';
    END IF;
    INSERT INTO _measure.measurement (system_id, name, contab, source, start_at, stop_at, interval_us, state)
    VALUES (v_system, upper(p_name), p_contab, p_source, p_start_at, p_stop_at, p_interval_us,
            CASE WHEN p_start_at IS NULL THEN 'configured' ELSE 'scheduled' END)
    RETURNING measurement_id INTO v_id;
    RETURN v_id;
EXCEPTION WHEN unique_violation THEN
    RAISE EXCEPTION 'a measurement named % is already configured or running on this system', upper(p_name)
        USING ERRCODE = '23505', COLUMN = 'name';
END
$$;
REVOKE ALL ON FUNCTION measure.create_measurement(text, text, jsonb, text, timestamptz, timestamptz, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.create_measurement(text, text, jsonb, text, timestamptz, timestamptz, bigint) TO measure_api;

-- START MEASUREMENT of a configured measurement: FROM (default now), TO, INTERVAL.
CREATE OR REPLACE FUNCTION measure.start_measurement(
    p_id integer, p_start_at timestamptz, p_stop_at timestamptz, p_interval_us bigint)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_state text;
    v_start timestamptz := coalesce(p_start_at, now());
BEGIN
    SELECT state INTO v_state FROM _measure.measurement WHERE measurement_id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no measurement %', p_id USING ERRCODE = 'P0002', COLUMN = 'measurement_id';
    END IF;
    IF v_state <> 'configured' THEN
        RAISE EXCEPTION 'measurement % is %; only a configured measurement can be started', p_id, v_state
            USING ERRCODE = '55000', COLUMN = 'measurement_id';
    END IF;
    IF p_stop_at IS NOT NULL AND p_stop_at <= v_start THEN
        RAISE EXCEPTION 'stop time % is not after start time %', p_stop_at, v_start
            USING ERRCODE = '22023', COLUMN = 'stop_at';
    END IF;
    IF p_interval_us IS NOT NULL AND p_interval_us < 1000000 THEN
        RAISE EXCEPTION 'interval must be at least 1 second' USING ERRCODE = '22023', COLUMN = 'interval_seconds';
    END IF;
    UPDATE _measure.measurement
       SET start_at = v_start, stop_at = p_stop_at,
           interval_us = coalesce(p_interval_us, interval_us),
           state = 'scheduled', updated_at = now()
     WHERE measurement_id = p_id;
END
$$;
REVOKE ALL ON FUNCTION measure.start_measurement(integer, timestamptz, timestamptz, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.start_measurement(integer, timestamptz, timestamptz, bigint) TO measure_api;

-- STOP MEASUREMENT: at p_stop_at (default now). A measurement that has not started by then
-- is stopped at once (it never runs); a configured one becomes stopped.
CREATE OR REPLACE FUNCTION measure.stop_measurement(p_id integer, p_stop_at timestamptz)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    m _measure.measurement;
    v_stop timestamptz := coalesce(p_stop_at, now());
BEGIN
    SELECT * INTO m FROM _measure.measurement WHERE measurement_id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no measurement %', p_id USING ERRCODE = 'P0002', COLUMN = 'measurement_id';
    END IF;
    IF m.state IN ('stopped', 'failed') THEN
        RAISE EXCEPTION 'measurement % is already %', p_id, m.state
            USING ERRCODE = '55000', COLUMN = 'measurement_id';
    END IF;
    IF m.state = 'configured' OR (m.state = 'scheduled' AND m.start_at >= v_stop) THEN
        UPDATE _measure.measurement
           SET state = 'stopped', stopped_at = now(), updated_at = now(),
               state_detail = 'stopped before it started'
         WHERE measurement_id = p_id;
        RETURN;
    END IF;
    IF v_stop <= m.start_at THEN
        v_stop := m.start_at + interval '1 second';
    END IF;
    UPDATE _measure.measurement SET stop_at = v_stop, updated_at = now() WHERE measurement_id = p_id;
END
$$;
REVOKE ALL ON FUNCTION measure.stop_measurement(integer, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.stop_measurement(integer, timestamptz) TO measure_api;

-- Delete a measurement that is not collecting (configured, stopped or failed) with its
-- copies and interval records (its data file).
CREATE OR REPLACE FUNCTION measure.delete_measurement(p_id integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_state text;
BEGIN
    SELECT state INTO v_state FROM _measure.measurement WHERE measurement_id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no measurement %', p_id USING ERRCODE = 'P0002', COLUMN = 'measurement_id';
    END IF;
    IF v_state NOT IN ('configured', 'stopped', 'failed') THEN
        RAISE EXCEPTION 'measurement % is %; stop it before deleting it', p_id, v_state
            USING ERRCODE = '55000', COLUMN = 'measurement_id';
    END IF;
    -- its hours are condensed again without it (tiers of hours whose runs are gone stay)
    INSERT INTO _measure.tier_dirty AS d (system_id, hour_at)
    SELECT DISTINCT r.system_id, _measure.hour_of(r.from_at)
      FROM _measure.interval_run r WHERE r.measurement_id = p_id
    ON CONFLICT (system_id, hour_at) DO UPDATE SET noted_at = now();
    DELETE FROM _measure.interval_run WHERE measurement_id = p_id;
    DELETE FROM _measure.extra_copy WHERE measurement_id = p_id;
    DELETE FROM _measure.record_tier WHERE measurement_id = p_id;
    DELETE FROM _measure.discopen_file_tier WHERE measurement_id = p_id;
    DELETE FROM _measure.discopen_open_hours WHERE measurement_id = p_id;
    DELETE FROM _measure.measurement WHERE measurement_id = p_id;
END
$$;
REVOKE ALL ON FUNCTION measure.delete_measurement(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.delete_measurement(integer) TO measure_api;

-- ---------------------------------------------------------------- bearer tokens

-- The scope of a live token given its SHA-256 ('read' or 'write'), or NULL. Records the
-- use (at most once a minute per token, so reads do not write on every request).
CREATE OR REPLACE FUNCTION measure.token_scope(p_sha256 bytea)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_id integer;
    v_scope text;
    v_used timestamptz;
BEGIN
    SELECT token_id, scope, last_used_at INTO v_id, v_scope, v_used
      FROM _measure.api_token WHERE token_sha256 = p_sha256 AND revoked_at IS NULL;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF v_used IS NULL OR v_used < now() - interval '1 minute' THEN
        UPDATE _measure.api_token SET last_used_at = now() WHERE token_id = v_id;
    END IF;
    RETURN v_scope;
END
$$;
REVOKE ALL ON FUNCTION measure.token_scope(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.token_scope(bytea) TO measure_api;

-- ---------------------------------------------------------------- control requests

-- Hand a request to the running collector of a system: returns its id; NOTIFYs
-- measuredb_request with the id (delivered when the caller commits). The kinds are
-- core/control.py's RequestKind (tests/core/test_control.py checks that they agree).
CREATE OR REPLACE FUNCTION measure.submit_request(p_system_id smallint, p_kind text, p_payload jsonb)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_id bigint;
BEGIN
    IF p_kind NOT IN ('read_active', 'status', 'bump_init', 'bump') THEN
        RAISE EXCEPTION 'unknown request kind %', p_kind USING ERRCODE = '22023', COLUMN = 'kind';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM _measure.system WHERE system_id = p_system_id) THEN
        RAISE EXCEPTION 'no system %', p_system_id USING ERRCODE = 'P0002', COLUMN = 'system';
    END IF;
    INSERT INTO _measure.control_request (system_id, kind, payload)
    VALUES (p_system_id, p_kind, p_payload) RETURNING request_id INTO v_id;
    PERFORM pg_notify('measuredb_request', v_id::text);
    RETURN v_id;
END
$$;
REVOKE ALL ON FUNCTION measure.submit_request(smallint, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.submit_request(smallint, text, jsonb) TO measure_api;

-- The collector's answer to a request (answered_at NULL while pending; no row: unknown id):
-- its response, or its error code (core/control.py) and message.
-- (a changed result type needs the old function dropped first)
DO $drop$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_proc
                WHERE oid = to_regprocedure('measure.request_answer(bigint)')
                  AND NOT 'error_code' = ANY (proargnames)) THEN
        DROP FUNCTION measure.request_answer(bigint);
    END IF;
END
$drop$;

CREATE OR REPLACE FUNCTION measure.request_answer(p_id bigint)
RETURNS TABLE (answered_at timestamptz, response jsonb, error_code text, error text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT r.answered_at, r.response, r.error_code, r.error
      FROM _measure.control_request r WHERE r.request_id = p_id
$$;
REVOKE ALL ON FUNCTION measure.request_answer(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.request_answer(bigint) TO measure_api;
