-- 101-interval-runs-migrate: an existing database moves to the interval runs of 100 with its
-- data, in the schema runner's one transaction (all or nothing).
--
-- Interval records become runs by the collector's own rule (collector/sink.py, RunBuilder):
-- one run per counter record and measurement for each stretch of consecutive intervals
-- (each FROM = the previous TO) of one UTC hour with equal DELTA-TIME, CPU, ERROR and number of
-- counters (a catalogue that grew leaves shorter arrays in older records), ending
-- at the first interval closed by an entity-stop or stop copy. A run's base is the copy
-- that opened it, kept when the run starts a chain (no interval ends where it begins) or is
-- the record's first of its UTC day; its tail, for entity types with STARTING-… snapshot
-- counters, holds their values at the run's last copy. Copies that close no interval go to
-- _measure.extra_copy as they are. Then the two old tables are dropped: measure.counter_copy
-- and measure.interval_record (schema/idempotent/030-api.sql) derive the same rows from the
-- runs. The tiers stay as they are (they were computed from the same intervals).

-- plain PostgreSQL: the daily partitions the records need (named and made as
-- _measure.run_partitions_for makes them, schema/idempotent/015-runs.sql)
DO $parts$
DECLARE
    v_day date;
BEGIN
    IF (SELECT c.relkind FROM pg_class c WHERE c.oid = '_measure.interval_run'::regclass) <> 'p' THEN
        RETURN;
    END IF;
    FOR v_day IN SELECT DISTINCT (ir.from_at AT TIME ZONE 'UTC')::date FROM _measure.interval_record ir ORDER BY 1 LOOP
        EXECUTE format('CREATE TABLE _measure.%I PARTITION OF _measure.interval_run '
                       'FOR VALUES FROM (%L) TO (%L) WITH (toast_tuple_target = 128)',
                       'interval_run_p' || to_char(v_day, 'YYYYMMDD'), (v_day + time '00:00') AT TIME ZONE 'UTC',
                       (v_day + 1 + time '00:00') AT TIME ZONE 'UTC');
    END LOOP;
END
$parts$;

CREATE TEMP TABLE _mig_start ON COMMIT DROP AS
SELECT t.type_code, array_agg(d.position ORDER BY d.position) AS pos
  FROM _measure.counter_def d JOIN _measure.entity_type t ON t.entity = d.entity
 WHERE d.kind = 'snapshot' AND (d.measure_name LIKE 'STARTING-%' OR d.measure_name LIKE '%-START')
 GROUP BY t.type_code;

INSERT INTO _measure.interval_run (system_id, type_code, measurement_id, entity_id, record_at, from_at,
                                   delta_us, n, closing_kind, cpu, error, counters, base, tail, nonzero)
WITH r AS (
    SELECT ir.*,
           lag(ir.to_at) OVER w AS p_to, lag(ir.from_at) OVER w AS p_from,
           lag(ir.delta_us) OVER w AS p_delta, lag(ir.closing_kind) OVER w AS p_kind,
           lag(ir.cpu) OVER w AS p_cpu, lag(ir.error) OVER w AS p_error,
           lag(cardinality(ir.counters)) OVER w AS p_len
      FROM _measure.interval_record ir
    WINDOW w AS (PARTITION BY ir.measurement_id, ir.entity_id, ir.record_at ORDER BY ir.from_at)),
f AS (
    SELECT r.*,
           (r.p_to IS DISTINCT FROM r.from_at OR r.p_kind <> 3 OR r.p_delta <> r.delta_us
            OR r.p_cpu <> r.cpu OR r.p_error <> r.error OR r.p_len <> cardinality(r.counters)
            OR date_bin(INTERVAL '1 hour', r.p_from, TIMESTAMPTZ '2000-01-01 00:00:00+00')
               <> date_bin(INTERVAL '1 hour', r.from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00')) AS brk,
           (r.p_to IS DISTINCT FROM r.from_at
            OR date_trunc('day', r.p_from, 'UTC') <> date_trunc('day', r.from_at, 'UTC')) AS needs_base
      FROM r),
g AS (
    SELECT f.*, count(*) FILTER (WHERE f.brk) OVER (PARTITION BY f.measurement_id, f.entity_id, f.record_at
                                                     ORDER BY f.from_at) AS run_no
      FROM f),
runs AS (
    SELECT g.measurement_id, g.entity_id, g.record_at, min(g.system_id) AS system_id,
           min(g.type_code) AS type_code, min(g.from_at) AS from_at, max(g.to_at) AS to_at,
           min(g.delta_us) AS delta_us, count(*)::smallint AS n,
           (array_agg(g.closing_kind ORDER BY g.from_at DESC))[1] AS closing_kind,
           min(g.cpu) AS cpu, min(g.error) AS error,
           array_agg(g.counters ORDER BY g.from_at) AS counters,
           (array_agg(g.needs_base ORDER BY g.from_at))[1] AS needs_base
      FROM g
     GROUP BY g.measurement_id, g.entity_id, g.record_at, g.run_no)
SELECT runs.system_id, runs.type_code, runs.measurement_id, runs.entity_id, runs.record_at, runs.from_at,
       runs.delta_us, runs.n, runs.closing_kind, runs.cpu, runs.error, runs.counters,
       CASE WHEN runs.needs_base THEN
            (SELECT cc.counters FROM _measure.counter_copy cc
              WHERE cc.measurement_id = runs.measurement_id AND cc.entity_id = runs.entity_id
                AND cc.record_at = runs.record_at AND cc.copy_at = runs.from_at
              ORDER BY cc.copy_kind DESC LIMIT 1) END,
       (SELECT ARRAY(SELECT cc.counters[p] FROM unnest(s.pos) p)
          FROM _mig_start s, _measure.counter_copy cc
         WHERE s.type_code = runs.type_code
           AND cc.measurement_id = runs.measurement_id AND cc.entity_id = runs.entity_id
           AND cc.record_at = runs.record_at AND cc.copy_at = runs.to_at
         ORDER BY cc.copy_kind DESC LIMIT 1),
       CASE WHEN array_length(runs.counters, 2) <= 63 THEN
            (SELECT bit_or(CASE WHEN u.x <> 0 THEN 1::bigint << ((u.o - 1) % array_length(runs.counters, 2))::integer
                                ELSE 0 END)
               FROM unnest(runs.counters) WITH ORDINALITY u (x, o)) END
  FROM runs;

INSERT INTO _measure.extra_copy (measurement_id, entity_id, record_at, copy_at, copy_kind, system_id,
                                 type_code, cpu, error, counters)
SELECT cc.measurement_id, cc.entity_id, cc.record_at, cc.copy_at, cc.copy_kind, cc.system_id,
       cc.type_code, cc.cpu, cc.error, cc.counters
  FROM _measure.counter_copy cc
 WHERE cc.copy_kind IN (1, 2) OR cc.error <> 0
    OR NOT EXISTS (SELECT 1 FROM _measure.interval_record ir
                    WHERE ir.measurement_id = cc.measurement_id AND ir.entity_id = cc.entity_id
                      AND ir.record_at = cc.record_at AND ir.to_at = cc.copy_at
                      AND ir.closing_kind = cc.copy_kind);

DROP VIEW IF EXISTS measure.interval_record;
DROP TABLE _measure.counter_copy;
DROP TABLE _measure.interval_record;
DROP TABLE _measure.raw_horizon CASCADE;  -- its value lives on in _measure.purged (100)
