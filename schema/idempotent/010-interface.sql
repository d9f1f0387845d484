-- 010-interface: the public schema `measure` (read by the API and Grafana roles):
-- catalogue and control-plane views, time conversions and MEASURE's RATE ON reductions.
-- Re-applied on every start; every object is CREATE OR REPLACE with its grant beside it.

-- ---------------------------------------------------------------- catalogue and systems

CREATE OR REPLACE VIEW measure.entity_type AS
SELECT type_code, entity, measure_name, id_fields, help
  FROM _measure.entity_type;
GRANT SELECT ON measure.entity_type TO measure_writer, measure_api, measure_reader;

CREATE OR REPLACE VIEW measure.counter_def AS
SELECT d.entity, t.type_code, d.counter, d.measure_name, d.kind, d.unit, d.max_of, d.help, d.position
  FROM _measure.counter_def d JOIN _measure.entity_type t USING (entity);
GRANT SELECT ON measure.counter_def TO measure_writer, measure_api, measure_reader;

-- The entity types with hour, shift, month and year tiers (measure.<entity>_hour … _year), in
-- the catalogue's order (schema/catalog/entities.csv, column tier_order; loaded before these
-- files run). Every loop over them and every check of an entity argument reads this list.
CREATE OR REPLACE FUNCTION _measure.tiered_entities()
RETURNS text[] LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(t.entity ORDER BY t.tier_order), '{}') FROM _measure.tier_entity t
$$;
REVOKE ALL ON FUNCTION _measure.tiered_entities() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _measure.tiered_entities() TO measure_writer;

CREATE OR REPLACE VIEW measure.system AS
SELECT system_id, system_name, system_number, time_zone, os_version
  FROM _measure.system;
GRANT SELECT ON measure.system TO measure_writer, measure_api, measure_reader;

CREATE OR REPLACE VIEW measure.measurement AS
SELECT m.measurement_id, s.system_name, m.name, m.state, m.state_detail, m.start_at, m.stop_at,
       m.interval_us / 1000000.0 AS interval_seconds, m.started_at, m.stopped_at,
       m.contab, m.source, m.created_at, m.updated_at, m.usage
  FROM _measure.measurement m JOIN _measure.system s USING (system_id);
GRANT SELECT ON measure.measurement TO measure_writer, measure_api, measure_reader;

CREATE OR REPLACE VIEW measure.collector_heartbeat AS
SELECT h.collector_id, s.system_name, h.node, h.mode, h.started_at, h.beat_at, h.simulated_at,
       h.detail
  FROM _measure.collector_heartbeat h LEFT JOIN _measure.system s USING (system_id);
GRANT SELECT ON measure.collector_heartbeat TO measure_writer, measure_api, measure_reader;

-- What GET /health reports about the database.
-- (the latest heartbeat's mode and detail say whether the collector is starting: registering,
-- compiling its node, backfilling, with its progress; measure.schema_info's columns grew, so it
-- is made anew)
DO $drop$
BEGIN
    IF to_regprocedure('measure.schema_info()') IS NOT NULL
       AND pg_get_function_result(to_regprocedure('measure.schema_info()')) NOT LIKE '%collector_mode%' THEN
        DROP FUNCTION measure.schema_info();
    END IF;
END
$drop$;
CREATE OR REPLACE FUNCTION measure.schema_info()
RETURNS TABLE (schema_version integer, timescaledb boolean, last_heartbeat_at timestamptz,
               collector_mode text, collector_detail jsonb)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT (SELECT max(version) FROM _measure.schema_version),
           (SELECT timescaledb FROM _measure.install_info),
           h.beat_at, h.mode, h.detail
      FROM (SELECT 1) one
      LEFT JOIN LATERAL (SELECT beat_at, mode, detail FROM _measure.collector_heartbeat
                          ORDER BY beat_at DESC LIMIT 1) h ON true
$$;
REVOKE ALL ON FUNCTION measure.schema_info() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.schema_info() TO measure_writer, measure_api, measure_reader;

-- ---------------------------------------------------------------- MEASURE time

-- MEASURE stamps FROM-/TO-TIMESTAMP as Julian microseconds in local civil time (LCT),
-- counted from noon, 1 January 4713 BC. unix_us = jts - 210866760000000000
-- (measure-reference §3.4; note the midnight-based 210866803200000000 is 12 h off).
CREATE OR REPLACE FUNCTION measure.julian_timestamp(ts timestamptz, time_zone text)
RETURNS bigint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT 210866760000000000
           + (extract(epoch FROM (ts AT TIME ZONE time_zone)::timestamp) * 1000000)::bigint
$$;
GRANT EXECUTE ON FUNCTION measure.julian_timestamp(timestamptz, text)
    TO measure_writer, measure_api, measure_reader;

CREATE OR REPLACE FUNCTION measure.from_julian_timestamp(jts bigint, time_zone text)
RETURNS timestamptz LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT (to_timestamp((jts - 210866760000000000) / 1000000.0) AT TIME ZONE 'UTC')
           AT TIME ZONE time_zone
$$;
GRANT EXECUTE ON FUNCTION measure.from_julian_timestamp(bigint, text)
    TO measure_writer, measure_api, measure_reader;

-- ---------------------------------------------------------------- RATE ON (style P3)
-- The counter kind decides the reduction, here and nowhere else. A negative delta (a
-- counter reset, e.g. a CPU reload inside the interval) is clamped to zero.

CREATE OR REPLACE FUNCTION measure.per_second(delta numeric, delta_us numeric)
RETURNS numeric LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT greatest(delta, 0) * 1000000 / nullif(delta_us, 0)
$$;
GRANT EXECUTE ON FUNCTION measure.per_second(numeric, numeric)
    TO measure_writer, measure_api, measure_reader;

CREATE OR REPLACE FUNCTION measure.busy_percent(busy_us numeric, delta_us numeric)
RETURNS numeric LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 100 * greatest(busy_us, 0) / nullif(delta_us, 0)
$$;
GRANT EXECUTE ON FUNCTION measure.busy_percent(numeric, numeric)
    TO measure_writer, measure_api, measure_reader;

CREATE OR REPLACE FUNCTION measure.avg_queue_length(queue_us numeric, delta_us numeric)
RETURNS numeric LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT greatest(queue_us, 0) / nullif(delta_us, 0)
$$;
GRANT EXECUTE ON FUNCTION measure.avg_queue_length(numeric, numeric)
    TO measure_writer, measure_api, measure_reader;

-- RATE ON for any counter, by kind: per second, busy % (busy, qbusy, and elapsed as MEASCOM shows it), average queue length, average
-- response (µs per transaction, given the paired count), or the value itself.
CREATE OR REPLACE FUNCTION measure.rate(kind text, delta numeric, delta_us numeric,
                                        paired_count numeric DEFAULT NULL)
RETURNS numeric LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE kind
        WHEN 'incrementing' THEN measure.per_second(delta, delta_us)
        WHEN 'accumulating' THEN measure.per_second(delta, delta_us)
        WHEN 'busy'         THEN measure.busy_percent(delta, delta_us)
        WHEN 'qbusy'        THEN measure.busy_percent(delta, delta_us)
        WHEN 'elapsed'      THEN measure.busy_percent(delta, delta_us)
        WHEN 'queue'        THEN measure.avg_queue_length(delta, delta_us)
        WHEN 'response'     THEN greatest(delta, 0) / nullif(paired_count, 0)
        ELSE delta
    END
$$;
GRANT EXECUTE ON FUNCTION measure.rate(text, numeric, numeric, numeric)
    TO measure_writer, measure_api, measure_reader;
