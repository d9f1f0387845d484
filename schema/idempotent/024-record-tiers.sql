-- 024-record-tiers: per-record sums by UTC hour, day and month, and the histogram of
-- interval response times (tables: schema/090-record-tiers.sql, which says why).
--
-- Every range read of a window is a LATERAL subquery with OFFSET 0: a parameterised index
-- probe per range. Flattened into a join, with the ranges' selectivity unknown, the planner
-- chose to read all of interval_record once per call (minutes for a year of records). Ranges
-- within one day (condensing works a UTC day at a time) are flattened instead: the hull of
-- the ranges bounds the read, and the query can be planned in parallel, which an OFFSET 0
-- subquery forbids (_measure.range_probe).
--
-- Kept by _measure.condense_records (called by _measure.condense_upper for the hours it
-- condenses), read by _measure.record_window, _measure.discopen_window and
-- _measure.response_window, which cut a window with _measure.window_plan.
-- `SET measuredb.record_tiers = off` makes every window read interval records only (tests
-- and benchmarks compare the two).

-- The bin of an interval's mean response r / n (microseconds): bin k holds the means in
-- (1.01^(k-1), 1.01^k]; means below 1 microsecond fall in bin 0. (Not STRICT: a STRICT
-- function whose body is not is never inlined, which cost 2 microseconds a record.)
CREATE OR REPLACE FUNCTION _measure.response_bin(p_response numeric, p_transactions numeric)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN greatest(ceil(ln(greatest(p_response::float8 / p_transactions::float8, 1)) / ln(1.01::float8)), 0)::integer;

-- 'ARRAY[sum(<expr>[1]), ...]' over every counter position of an entity type, the sum for
-- the counters of _measure.record_tier_counter, NULL for the others (explicit sums:
-- unnesting the arrays made the reports O(records x counters) in rows).
CREATE OR REPLACE FUNCTION _measure.record_sums_sql(p_type smallint, p_expr text, p_clamp boolean,
                                                    p_cast text DEFAULT '')
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT 'ARRAY[' || string_agg(
               CASE WHEN k.counter IS NULL THEN 'NULL::' || CASE WHEN p_cast = '' THEN 'numeric' ELSE ltrim(p_cast, ':') END
                    WHEN p_clamp THEN format('sum(greatest(%s[%s], 0))%s', p_expr, d.position, p_cast)
                    ELSE format('sum(%s[%s])%s', p_expr, d.position, p_cast) END,
               ', ' ORDER BY d.position) || ']'
      FROM _measure.counter_def d JOIN _measure.entity_type t ON t.entity = d.entity
      LEFT JOIN _measure.record_tier_counter k ON k.entity = d.entity AND k.counter = d.counter
     WHERE t.type_code = p_type
$$;

-- The clause that ends a range read of _measure.record_rows and _measure.discopen_rows:
-- OFFSET 0 (a probe per range, not flattened) unless the ranges lie within one day.
CREATE OR REPLACE FUNCTION _measure.range_probe(p_lo timestamptz[], p_hi timestamptz[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN (SELECT max(hi) FROM unnest(p_hi) hi) - (SELECT min(lo) FROM unnest(p_lo) lo)
                     <= INTERVAL '1 day' THEN '' ELSE 'OFFSET 0' END
$$;
GRANT EXECUTE ON FUNCTION _measure.range_probe(timestamptz[], timestamptz[]) TO measure_writer;

-- Per counter record, measurement and UTC hour, the sums of the interval records of the
-- ranges [p_lo[i], p_hi[i]) (by FROM-TIMESTAMP), with best = this measurement has the most
-- measured time of the entity in that hour (within the ranges; ties: the lower id).
CREATE OR REPLACE FUNCTION _measure.record_rows(p_system smallint, p_type smallint, p_lo timestamptz[],
                                                p_hi timestamptz[], p_measurement integer)
RETURNS TABLE (entity_id bigint, record_at timestamptz, measurement_id integer, hour_at timestamptz,
               best boolean, cpu smallint, first_at timestamptz, last_at timestamptz, samples integer,
               run_us bigint, counters bigint[])
LANGUAGE plpgsql STABLE SET work_mem = '256MB' SET enable_sort = off SET enable_indexscan = off AS $fn$
BEGIN
    IF p_lo IS NULL OR cardinality(p_lo) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format($q$
        WITH r AS (
            SELECT ir.entity_id, ir.record_at, ir.measurement_id,
                   ir.hour_at, min(ir.cpu) AS cpu, min(ir.from_at) AS first_at, max(ir.to_at) AS last_at,
                   count(*)::integer AS samples, sum(ir.delta_us)::bigint AS run_us, %s AS counters
              FROM unnest($3, $4) w (lo, hi)
             CROSS JOIN LATERAL (
                   SELECT * FROM _measure.intervals($1, $2, w.lo, w.hi, NULL, $6, $7) ir
                    WHERE $5 IS NULL OR ir.measurement_id = $5
                    %s) ir
             GROUP BY 1, 2, 3, 4),
        m AS (
            SELECT x.entity_id, x.hour_at, x.measurement_id,
                   row_number() OVER (PARTITION BY x.entity_id, x.hour_at
                                      ORDER BY x.run DESC, x.measurement_id) = 1 AS best
              FROM (SELECT r.entity_id, r.hour_at, r.measurement_id, sum(r.run_us) AS run
                      FROM r GROUP BY 1, 2, 3) x)
        SELECT r.entity_id, r.record_at, r.measurement_id, r.hour_at, m.best, r.cpu, r.first_at,
               r.last_at, r.samples, r.run_us, r.counters
          FROM r JOIN m USING (entity_id, hour_at, measurement_id)$q$,
        _measure.record_sums_sql(p_type, 'ir.c[ir.i]', true, '::bigint'), _measure.range_probe(p_lo, p_hi))
    USING p_system, p_type, p_lo, p_hi, p_measurement,  -- $6, $7: the hull of the ranges
          (SELECT _measure.hour_of(min(lo)) FROM unnest(p_lo) lo), (SELECT max(hi) FROM unnest(p_hi) hi);
END
$fn$;
GRANT EXECUTE ON FUNCTION _measure.record_rows(smallint, smallint, timestamptz[], timestamptz[], integer) TO measure_writer;

-- The entity types whose interval records give transactions and response time, in the
-- order the transaction-resource report prefers them, with the counters' positions.
CREATE OR REPLACE VIEW _measure.response_source AS
SELECT v.ord, v.entity, t.type_code,
       (SELECT d.position FROM _measure.counter_def d WHERE d.entity = v.entity AND d.counter = 'transactions') AS tpos,
       (SELECT d.position FROM _measure.counter_def d WHERE d.entity = v.entity AND d.counter = 'response_time') AS rpos
  FROM (VALUES (1, 'terminal'), (2, 'line'), (3, 'cpu')) v (ord, entity)
  JOIN _measure.entity_type t ON t.entity = v.entity;
GRANT SELECT ON _measure.response_source TO measure_writer;

-- Per entity and UTC hour of the ranges [p_lo[i], p_hi[i]), the measurement with the most
-- measured time (ties: the lower id), from the runs' bounds alone (no counter is read).
DROP FUNCTION IF EXISTS _measure.run_best(smallint, smallint, timestamptz[], timestamptz[]);
CREATE OR REPLACE FUNCTION _measure.run_best(p_system smallint, p_type smallint, p_lo timestamptz[],
                                             p_hi timestamptz[], p_span_lo timestamptz DEFAULT NULL,
                                             p_span_hi timestamptz DEFAULT NULL)
RETURNS TABLE (entity_id bigint, hour_at timestamptz, measurement_id integer)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT DISTINCT ON (a.entity_id, a.hour_at) a.entity_id, a.hour_at, a.measurement_id
      FROM (SELECT r.entity_id, _measure.hour_of(r.from_at) AS hour_at, r.measurement_id,
                   sum(greatest(0, least(r.n, measure.run_last(r.from_at, r.delta_us, w.hi))
                                   - measure.run_first(r.from_at, r.delta_us, w.lo) + 1) * r.delta_us) AS run
              FROM unnest(p_lo, p_hi) w (lo, hi)
              JOIN _measure.interval_run r
                ON r.system_id = p_system AND r.type_code = p_type
               AND r.from_at >= _measure.hour_of(w.lo) AND r.from_at < w.hi
               AND (p_span_lo IS NULL OR r.from_at >= p_span_lo) AND (p_span_hi IS NULL OR r.from_at < p_span_hi)
             GROUP BY 1, 2, 3) a
     WHERE a.run > 0
     ORDER BY a.entity_id, a.hour_at, a.run DESC, a.measurement_id
$$;
GRANT EXECUTE ON FUNCTION _measure.run_best(smallint, smallint, timestamptz[], timestamptz[], timestamptz, timestamptz)
    TO measure_writer;

-- Per response source, UTC hour and bin: the interval records with transactions of the
-- ranges [p_lo[i], p_hi[i]), one measurement per entity-hour (the most measured time; ties:
-- the lower id).
CREATE OR REPLACE FUNCTION _measure.response_rows(p_system smallint, p_lo timestamptz[], p_hi timestamptz[])
RETURNS TABLE (type_code smallint, hour_at timestamptz, bin integer, records bigint, transactions bigint,
               response_us bigint, mean_max_us numeric)
LANGUAGE plpgsql STABLE SET work_mem = '256MB' SET enable_sort = off SET enable_indexscan = off
SET plan_cache_mode = force_custom_plan AS $fn$
DECLARE
    s record;
    v_lo timestamptz := (SELECT _measure.hour_of(min(lo)) FROM unnest(p_lo) lo);  -- the hull of the ranges,
    v_hi timestamptz := (SELECT max(hi) FROM unnest(p_hi) hi);                    -- constants of each plan
BEGIN
    IF p_lo IS NULL OR cardinality(p_lo) = 0 THEN
        RETURN;
    END IF;
    -- one source at a time, its type and positions constants of the query: the planner reads
    -- each range from the (system_id, type_code, from_at) index
    FOR s IN SELECT * FROM _measure.response_source ORDER BY ord LOOP
        -- one query (no materialised CTE): the intervals, joined to the best measurement's
        -- runs and grouped, can then be planned in parallel
        RETURN QUERY
        SELECT s.type_code, y.hour_at, _measure.response_bin(y.r, y.n), count(*), sum(y.n)::bigint,
               sum(y.r)::bigint, max(y.r::numeric / y.n)
          FROM (SELECT ir.entity_id, ir.measurement_id, ir.hour_at,
                       ir.c[ir.i][s.tpos] AS n, greatest(ir.c[ir.i][s.rpos], 0) AS r
                  FROM unnest(p_lo, p_hi) w (lo, hi)
                 CROSS JOIN LATERAL _measure.intervals(p_system, s.type_code, w.lo, w.hi,
                                                       1::bigint << (s.tpos - 1), v_lo, v_hi) ir) y
          JOIN _measure.run_best(p_system, s.type_code, p_lo, p_hi, v_lo, v_hi) b
         USING (entity_id, hour_at, measurement_id)
         WHERE y.n > 0
         GROUP BY 2, 3;
    END LOOP;
END
$fn$;
GRANT EXECUTE ON FUNCTION _measure.response_rows(smallint, timestamptz[], timestamptz[]) TO measure_writer;

-- The day ('d') or month ('m') rows of the given UTC buckets from the rows below them
-- (hours, days): per measurement, and of the best rows (measurement_id 0).
CREATE OR REPLACE FUNCTION _measure.condense_record_rollup(p_system smallint, p_type smallint, p_grain "char",
                                                           p_buckets timestamptz[])
RETURNS void LANGUAGE plpgsql SET work_mem = '256MB' AS $fn$
DECLARE
    v_unit text := CASE p_grain WHEN 'd' THEN 'day' ELSE 'month' END;
    v_src "char" := CASE p_grain WHEN 'd' THEN 'h' ELSE 'd' END;
    v_sums text := _measure.record_sums_sql(p_type, 't.counters', false, '::bigint');
BEGIN
    DELETE FROM _measure.record_tier t
     WHERE t.system_id = p_system AND t.type_code = p_type AND t.grain = p_grain AND t.bucket_at = ANY (p_buckets);
    EXECUTE format($q$
        INSERT INTO _measure.record_tier (system_id, type_code, grain, bucket_at, entity_id, record_at,
                                          measurement_id, best, cpu, first_at, last_at, samples, run_us, counters)
        SELECT $1, $2, $3, b.lo, t.entity_id, t.record_at, CASE WHEN g.best_of THEN 0 ELSE t.measurement_id END,
               g.best_of, min(t.cpu), min(t.first_at), max(t.last_at), sum(t.samples)::integer,
               sum(t.run_us)::bigint, %s
          FROM (SELECT x AS lo, ((x AT TIME ZONE 'UTC') + INTERVAL '1 %s') AT TIME ZONE 'UTC' AS hi
                  FROM unnest($4) x) b
         CROSS JOIN (VALUES (true), (false)) g (best_of)
         CROSS JOIN LATERAL (
               SELECT * FROM _measure.record_tier t
                WHERE t.system_id = $1 AND t.type_code = $2 AND t.grain = %L
                  AND t.bucket_at >= b.lo AND t.bucket_at < b.hi
                OFFSET 0) t
         WHERE CASE WHEN g.best_of THEN (CASE WHEN %L = 'h' THEN t.best ELSE t.measurement_id = 0 END)
                    ELSE t.measurement_id <> 0 END
         GROUP BY b.lo, t.entity_id, t.record_at, 7, g.best_of$q$, v_sums, v_unit, v_src, v_src)
    USING p_system, p_type, p_grain, p_buckets;
END
$fn$;
GRANT EXECUTE ON FUNCTION _measure.condense_record_rollup(smallint, smallint, "char", timestamptz[]) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.condense_hist_rollup(p_system smallint, p_grain "char", p_buckets timestamptz[])
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_unit interval := CASE p_grain WHEN 'd' THEN INTERVAL '1 day' ELSE INTERVAL '1 month' END;
    v_src "char" := CASE p_grain WHEN 'd' THEN 'h' ELSE 'd' END;
BEGIN
    DELETE FROM _measure.response_hist h
     WHERE h.system_id = p_system AND h.grain = p_grain AND h.bucket_at = ANY (p_buckets);
    INSERT INTO _measure.response_hist (system_id, type_code, grain, bucket_at, bin, records, transactions,
                                        response_us, mean_max_us)
    SELECT p_system, h.type_code, p_grain, b.lo, h.bin, sum(h.records), sum(h.transactions), sum(h.response_us),
           max(h.mean_max_us)
      FROM (SELECT x AS lo, ((x AT TIME ZONE 'UTC') + v_unit) AT TIME ZONE 'UTC' AS hi FROM unnest(p_buckets) x) b
     CROSS JOIN LATERAL (
           SELECT * FROM _measure.response_hist h
            WHERE h.system_id = p_system AND h.grain = v_src AND h.bucket_at >= b.lo AND h.bucket_at < b.hi
            OFFSET 0) h
     GROUP BY h.type_code, b.lo, h.bin;
END
$fn$;
GRANT EXECUTE ON FUNCTION _measure.condense_hist_rollup(smallint, "char", timestamptz[]) TO measure_writer;

-- The record tiers and response histograms of the given UTC hours (from interval records;
-- hours before _measure.raw_horizon() keep theirs), then of their days (their months:
-- _measure.condense_records_months). Called by _measure.condense_upper.
CREATE OR REPLACE FUNCTION _measure.condense_records(p_system smallint, p_hours timestamptz[])
RETURNS void LANGUAGE plpgsql SET work_mem = '256MB' AS $fn$
DECLARE
    v_days timestamptz[];
    v_day timestamptz;
    v_lo timestamptz[];
    v_hi timestamptz[];
    v_types smallint[];
    v_type smallint;
    v_fresh timestamptz[];
BEGIN
    IF p_hours IS NULL OR cardinality(p_hours) = 0 THEN
        RETURN;
    END IF;
    v_days := ARRAY(SELECT DISTINCT date_trunc('day', h, 'UTC') FROM unnest(p_hours) h ORDER BY 1);
    v_types := ARRAY(SELECT t.type_code FROM _measure.record_tier_type r
                       JOIN _measure.entity_type t USING (entity) ORDER BY 1);
    -- hour rows from interval runs, of the hours whose runs retention kept (per entity type)
    FOREACH v_type IN ARRAY v_types LOOP
        v_fresh := _measure.fresh_hours(p_system, v_type, p_hours);
        DELETE FROM _measure.record_tier t
         WHERE t.system_id = p_system AND t.type_code = v_type AND t.grain = 'h' AND t.bucket_at = ANY (v_fresh);
        -- a day at a time (a backlog of hundreds of hours stays a day's work in memory)
        FOREACH v_day IN ARRAY v_days LOOP
            v_lo := ARRAY(SELECT h FROM unnest(v_fresh) h WHERE date_trunc('day', h, 'UTC') = v_day ORDER BY 1);
            CONTINUE WHEN cardinality(v_lo) = 0;
            v_hi := ARRAY(SELECT h + INTERVAL '1 hour' FROM unnest(v_lo) h ORDER BY 1);
            INSERT INTO _measure.record_tier (system_id, type_code, grain, bucket_at, entity_id, record_at,
                                              measurement_id, best, cpu, first_at, last_at, samples, run_us, counters)
            SELECT p_system, v_type, 'h', r.hour_at, r.entity_id, r.record_at, r.measurement_id, r.best, r.cpu,
                   r.first_at, r.last_at, r.samples, r.run_us, r.counters
              FROM (SELECT count(*) FROM _measure.shard_route WHERE system_id = p_system) one  -- (where the runs are:
             CROSS JOIN LATERAL _measure.record_rows(p_system, v_type, v_lo, v_hi, NULL) r;     -- 130-shard-route.sql)
        END LOOP;
    END LOOP;
    v_fresh := _measure.fresh_hours(p_system, NULL, p_hours);
    DELETE FROM _measure.response_hist h
     WHERE h.system_id = p_system AND h.grain = 'h' AND h.bucket_at = ANY (v_fresh);
    FOREACH v_day IN ARRAY v_days LOOP
        v_lo := ARRAY(SELECT h FROM unnest(v_fresh) h WHERE date_trunc('day', h, 'UTC') = v_day ORDER BY 1);
        CONTINUE WHEN cardinality(v_lo) = 0;
        v_hi := ARRAY(SELECT h + INTERVAL '1 hour' FROM unnest(v_lo) h ORDER BY 1);
        INSERT INTO _measure.response_hist (system_id, type_code, grain, bucket_at, bin, records, transactions,
                                            response_us, mean_max_us)
        SELECT p_system, r.type_code, 'h', r.hour_at, r.bin, r.records, r.transactions, r.response_us, r.mean_max_us
          FROM (SELECT count(*) FROM _measure.shard_route WHERE system_id = p_system) one
         CROSS JOIN LATERAL _measure.response_rows(p_system, v_lo, v_hi) r;
    END LOOP;
    FOREACH v_type IN ARRAY v_types LOOP
        PERFORM _measure.condense_record_rollup(p_system, v_type, 'd', v_days);
    END LOOP;
    PERFORM _measure.condense_hist_rollup(p_system, 'd', v_days);
    PERFORM _measure.condense_discopen(p_system, p_hours);
    -- the month rows: _measure.condense_records_months (by _measure.condense_months)
END
$fn$;
GRANT EXECUTE ON FUNCTION _measure.condense_records(smallint, timestamptz[]) TO measure_writer;

-- The month rows of the record tiers, response histograms and DISCOPEN file tier of the UTC
-- months of p_hours, from their day rows.
CREATE OR REPLACE FUNCTION _measure.condense_records_months(p_system smallint, p_hours timestamptz[])
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_months timestamptz[] := ARRAY(SELECT DISTINCT date_trunc('month', h, 'UTC') FROM unnest(p_hours) h ORDER BY 1);
    v_type smallint;
BEGIN
    IF cardinality(v_months) = 0 THEN
        RETURN;
    END IF;
    FOR v_type IN SELECT t.type_code FROM _measure.record_tier_type r JOIN _measure.entity_type t USING (entity)
                   ORDER BY 1 LOOP
        PERFORM _measure.condense_record_rollup(p_system, v_type, 'm', v_months);
    END LOOP;
    PERFORM _measure.condense_hist_rollup(p_system, 'm', v_months);
    PERFORM _measure.condense_discopen_rollup(p_system, 'm', p_hours);
END
$fn$;
GRANT EXECUTE ON FUNCTION _measure.condense_records_months(smallint, timestamptz[]) TO measure_writer;

-- A window [p_from, p_to) cut into what the tiers hold and what interval records must give:
-- grain 'm', 'd', 'h' = the UTC month, day or hour starting at lo (wholly inside the window,
-- no hour of it waiting in _measure.tier_dirty after _measure.raw_horizon()), 'r' = the
-- range [lo, hi) of interval records (the partial hours at the edges, and hours not
-- condensed yet). Largest first: a year is about 12 months, a few days and hours. A partial
-- hour at an edge that lies before _measure.raw_horizon() (its records were dropped by
-- retention) counts whole, from the tiers. p_tiered = false (or the setting measuredb.record_tiers = off): the whole window
-- from interval records.
CREATE OR REPLACE FUNCTION _measure.window_plan(p_system smallint, p_from timestamptz, p_to timestamptz,
                                                p_tiered boolean DEFAULT true)
RETURNS TABLE (grain "char", lo timestamptz, hi timestamptz)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    c_origin CONSTANT timestamptz := TIMESTAMPTZ '2000-01-01 00:00:00+00';
    v_h0 timestamptz;
    v_h1 timestamptz;
    v_hz timestamptz;
BEGIN
    IF p_from IS NULL OR p_to IS NULL OR p_from >= p_to THEN
        RETURN;
    END IF;
    v_h0 := date_bin(INTERVAL '1 hour', p_from, c_origin);
    IF v_h0 < p_from THEN
        v_h0 := v_h0 + INTERVAL '1 hour';
    END IF;
    v_h1 := date_bin(INTERVAL '1 hour', p_to, c_origin);
    IF NOT p_tiered OR coalesce(current_setting('measuredb.record_tiers', true), '') = 'off' THEN
        RETURN QUERY SELECT 'r'::"char", p_from, p_to;
        RETURN;
    END IF;
    v_hz := _measure.raw_horizon();
    IF v_h0 > v_h1 THEN  -- inside one hour
        IF v_h1 < v_hz THEN
            RETURN QUERY SELECT 'h'::"char", v_h1, v_h0;
        ELSE
            RETURN QUERY SELECT 'r'::"char", p_from, p_to;
        END IF;
        RETURN;
    END IF;
    -- the partial hours at the edges; one whose records retention dropped counts whole
    IF p_from < v_h0 THEN
        IF v_h0 - INTERVAL '1 hour' < v_hz THEN
            RETURN QUERY SELECT 'h'::"char", v_h0 - INTERVAL '1 hour', v_h0;
        ELSE
            RETURN QUERY SELECT 'r'::"char", p_from, v_h0;
        END IF;
    END IF;
    IF v_h1 < p_to THEN
        IF v_h1 < v_hz THEN
            RETURN QUERY SELECT 'h'::"char", v_h1, v_h1 + INTERVAL '1 hour';
        ELSE
            RETURN QUERY SELECT 'r'::"char", v_h1, p_to;
        END IF;
    END IF;
    IF v_h0 = v_h1 THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH dirty AS MATERIALIZED (
        SELECT d.hour_at FROM _measure.tier_dirty d
         WHERE d.system_id = p_system AND d.hour_at >= v_h0 AND d.hour_at < v_h1
           AND d.hour_at >= v_hz),  -- older: the tiers are all there is
    days AS MATERIALIZED (
        SELECT x.lo, x.hi, x.lo >= v_h0 AND x.hi <= v_h1
                           AND NOT EXISTS (SELECT 1 FROM dirty WHERE dirty.hour_at >= x.lo AND dirty.hour_at < x.hi) AS whole
          FROM (SELECT d AT TIME ZONE 'UTC' AS lo, (d + INTERVAL '1 day') AT TIME ZONE 'UTC' AS hi
                  FROM generate_series(date_trunc('day', v_h0 AT TIME ZONE 'UTC'),
                                       v_h1 AT TIME ZONE 'UTC' - INTERVAL '1 hour', INTERVAL '1 day') d) x),
    months AS MATERIALIZED (
        SELECT x.lo, x.hi
          FROM (SELECT m AT TIME ZONE 'UTC' AS lo, (m + INTERVAL '1 month') AT TIME ZONE 'UTC' AS hi
                  FROM generate_series(date_trunc('month', v_h0 AT TIME ZONE 'UTC'),
                                       v_h1 AT TIME ZONE 'UTC' - INTERVAL '1 hour', INTERVAL '1 month') m) x
         WHERE x.lo >= v_h0 AND x.hi <= v_h1
           AND NOT EXISTS (SELECT 1 FROM dirty WHERE dirty.hour_at >= x.lo AND dirty.hour_at < x.hi))
    SELECT 'm'::"char", months.lo, months.hi FROM months
    UNION ALL
    SELECT 'd'::"char", days.lo, days.hi FROM days
     WHERE days.whole AND NOT EXISTS (SELECT 1 FROM months WHERE days.lo >= months.lo AND days.lo < months.hi)
    UNION ALL
    SELECT CASE WHEN EXISTS (SELECT 1 FROM dirty WHERE dirty.hour_at = h) THEN 'r'::"char" ELSE 'h'::"char" END,
           h, h + INTERVAL '1 hour'
      FROM days CROSS JOIN LATERAL generate_series(greatest(days.lo, v_h0), least(days.hi, v_h1) - INTERVAL '1 hour',
                                                   INTERVAL '1 hour') h
     WHERE NOT days.whole;
END
$fn$;
GRANT EXECUTE ON FUNCTION _measure.window_plan(smallint, timestamptz, timestamptz, boolean) TO measure_writer;

-- Per counter record (entity_id, record_at) of an entity type, the sums over the interval
-- records whose FROM-TIMESTAMP lies in [p_from, p_to): of one measurement, or (p_measurement
-- NULL) per entity and hour of the measurement with the most measured time. From the record
-- tiers where _measure.window_plan allows, from interval records elsewhere; the same sums.
CREATE OR REPLACE FUNCTION _measure.record_window(p_system smallint, p_type smallint, p_from timestamptz,
                                                  p_to timestamptz, p_measurement integer)
RETURNS TABLE (entity_id bigint, record_at timestamptz, cpu smallint, first_at timestamptz,
               last_at timestamptz, run_us numeric, c numeric[])
LANGUAGE plpgsql STABLE SET work_mem = '256MB' SET enable_sort = off SET enable_indexscan = off AS $fn$
DECLARE
    v_grain "char"[];
    v_at timestamptz[];
    v_lo timestamptz[];
    v_hi timestamptz[];
BEGIN
    SELECT array_agg(p.grain) FILTER (WHERE p.grain <> 'r'), array_agg(p.lo) FILTER (WHERE p.grain <> 'r'),
           array_agg(p.lo) FILTER (WHERE p.grain = 'r'), array_agg(p.hi) FILTER (WHERE p.grain = 'r')
      INTO v_grain, v_at, v_lo, v_hi
      FROM _measure.window_plan(p_system, p_from, p_to,
                                EXISTS (SELECT 1 FROM _measure.record_tier_type r JOIN _measure.entity_type t USING (entity)
                                        WHERE t.type_code = p_type)) p;
    RETURN QUERY EXECUTE format($q$
        WITH u AS (
            SELECT t.entity_id, t.record_at, t.cpu, t.first_at, t.last_at, t.run_us, t.counters
              FROM unnest($6, $7) p (grain, bucket_at)
             CROSS JOIN LATERAL (
                   SELECT * FROM _measure.record_tier t
                    WHERE t.system_id = $1 AND t.type_code = $2 AND t.grain = p.grain AND t.bucket_at = p.bucket_at
                      AND CASE WHEN $5 IS NULL THEN t.best ELSE t.measurement_id = $5 END
                    OFFSET 0) t
            UNION ALL
            SELECT r.entity_id, r.record_at, r.cpu, r.first_at, r.last_at, r.run_us, r.counters
              FROM _measure.record_rows($1, $2, $3, $4, $5) r
             WHERE $5 IS NOT NULL OR r.best)
        SELECT u.entity_id, u.record_at, min(u.cpu), min(u.first_at), max(u.last_at), sum(u.run_us), %s
          FROM u GROUP BY u.entity_id, u.record_at$q$,
        _measure.record_sums_sql(p_type, 'u.counters', false))
    USING p_system, p_type, v_lo, v_hi, p_measurement, v_grain, v_at;
END
$fn$;
GRANT EXECUTE ON FUNCTION _measure.record_window(smallint, smallint, timestamptz, timestamptz, integer) TO measure_writer;

-- Per response source and bin, the interval records with transactions whose FROM-TIMESTAMP
-- lies in [p_from, p_to) (one measurement per entity-hour), from the histograms where
-- _measure.window_plan allows.
CREATE OR REPLACE FUNCTION _measure.response_window(p_system smallint, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (type_code smallint, bin integer, records numeric, transactions numeric, response_us numeric,
               mean_max_us numeric)
LANGUAGE sql STABLE AS $$
    WITH p AS MATERIALIZED (SELECT * FROM _measure.window_plan(p_system, p_from, p_to)),
    u AS (
        SELECT h.type_code, h.bin, h.records, h.transactions, h.response_us, h.mean_max_us
          FROM p CROSS JOIN LATERAL (
                   SELECT * FROM _measure.response_hist h
                    WHERE h.system_id = p_system AND h.grain = p.grain AND h.bucket_at = p.lo
                    OFFSET 0) h
         WHERE p.grain <> 'r'
        UNION ALL
        SELECT r.type_code, r.bin, r.records, r.transactions, r.response_us, r.mean_max_us
          FROM _measure.response_rows(p_system, ARRAY(SELECT lo FROM p WHERE grain = 'r' ORDER BY lo),
                                      ARRAY(SELECT hi FROM p WHERE grain = 'r' ORDER BY lo)) r)
    SELECT u.type_code, u.bin, sum(u.records), sum(u.transactions), sum(u.response_us), max(u.mean_max_us)
      FROM u GROUP BY 1, 2
$$;
GRANT EXECUTE ON FUNCTION _measure.response_window(smallint, timestamptz, timestamptz) TO measure_writer;

-- ---------------------------------------------------------------- DISCOPEN by file

-- Per DISCOPEN counter record, measurement and UTC hour of the ranges [p_lo[i], p_hi[i]):
-- the sums of its interval records with DRIVER-INPUT-CALLS + DRIVER-OUTPUT-CALLS > 0 (rows
-- only where there are such records; runs without any are not read), best as in
-- _measure.record_rows (over all records: _measure.run_best).
CREATE OR REPLACE FUNCTION _measure.discopen_rows(p_system smallint, p_lo timestamptz[], p_hi timestamptz[],
                                                  p_measurement integer)
RETURNS TABLE (entity_id bigint, record_at timestamptz, measurement_id integer, hour_at timestamptz,
               best boolean, file_name text, samples integer, counters bigint[])
LANGUAGE plpgsql STABLE SET work_mem = '256MB' SET enable_sort = off SET enable_indexscan = off AS $fn$
DECLARE
    v_type smallint := (SELECT t.type_code FROM _measure.entity_type t WHERE t.entity = 'discopen');
    v_in smallint := (SELECT d.position FROM _measure.counter_def d
                       WHERE d.entity = 'discopen' AND d.counter = 'driver_input_calls');
    v_out smallint := (SELECT d.position FROM _measure.counter_def d
                        WHERE d.entity = 'discopen' AND d.counter = 'driver_output_calls');
    v_sums text;
BEGIN
    IF p_lo IS NULL OR cardinality(p_lo) = 0 OR v_type IS NULL THEN
        RETURN;
    END IF;
    v_sums := replace(_measure.record_sums_sql(v_type, 'ir.c[ir.i]', true, '::bigint'), ')::bigint',
                      ') FILTER (WHERE io)::bigint');
    RETURN QUERY EXECUTE format($q$
        WITH r AS (
            SELECT ir.entity_id, ir.record_at, ir.measurement_id, ir.hour_at,
                   count(*) FILTER (WHERE io)::integer AS samples, %s AS counters
              FROM (SELECT ir.*, greatest(ir.c[ir.i][%s], 0) + greatest(ir.c[ir.i][%s], 0) > 0 AS io
                      FROM unnest($2, $3) w (lo, hi)
                     CROSS JOIN LATERAL (
                           SELECT * FROM _measure.intervals($1, $5, w.lo, w.hi, $6, $7, $8) ir
                            WHERE $4 IS NULL OR ir.measurement_id = $4
                            %s) ir) ir
             GROUP BY 1, 2, 3, 4),
        m AS (SELECT * FROM _measure.run_best($1, $5, $2, $3, $7, $8))
        SELECT r.entity_id, r.record_at, r.measurement_id, r.hour_at, m.measurement_id IS NOT NULL,
               e.ids->>'file_name', r.samples, r.counters
          FROM r LEFT JOIN m USING (entity_id, hour_at, measurement_id)
          JOIN _measure.entity e ON e.entity_id = r.entity_id
         WHERE r.samples > 0$q$, v_sums, v_in, v_out, _measure.range_probe(p_lo, p_hi))
    USING p_system, p_lo, p_hi, p_measurement, v_type,
          _measure.counter_mask(v_type, ARRAY['driver_input_calls', 'driver_output_calls']),
          (SELECT _measure.hour_of(min(lo)) FROM unnest(p_lo) lo), (SELECT max(hi) FROM unnest(p_hi) hi);
END
$fn$;
GRANT EXECUTE ON FUNCTION _measure.discopen_rows(smallint, timestamptz[], timestamptz[], integer) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.hour_bits(p_hours timestamptz[], p_month timestamptz)
RETURNS bit(744) LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(bit_or(set_bit(repeat('0', 744)::bit(744),
                                   (extract(epoch FROM h - p_month) / 3600)::integer, 1)),
                    repeat('0', 744)::bit(744))
      FROM unnest(p_hours) h
     WHERE h >= p_month AND h < (p_month AT TIME ZONE 'UTC' + INTERVAL '1 month') AT TIME ZONE 'UTC'
$$;
GRANT EXECUTE ON FUNCTION _measure.hour_bits(timestamptz[], timestamptz) TO measure_writer;

-- The DISCOPEN file tier and open hours of the given UTC hours (one day at a time: a day of
-- the reference node is 14 million DISCOPEN interval records; not of hours before
-- _measure.raw_horizon()), then the day rows (their months: condense_discopen_rollup .m.).
CREATE OR REPLACE FUNCTION _measure.condense_discopen(p_system smallint, p_hours timestamptz[])
RETURNS void LANGUAGE plpgsql SET work_mem = '256MB' AS $fn$
DECLARE
    c_zero CONSTANT bit(744) := repeat('0', 744)::bit(744);
    v_type smallint := (SELECT t.type_code FROM _measure.entity_type t WHERE t.entity = 'discopen');
    v_sums text;
    v_day timestamptz;
    v_hours timestamptz[];
    v_month timestamptz;
    v_mask bit(744);
    v_fresh timestamptz[];
BEGIN
    IF v_type IS NULL OR p_hours IS NULL OR cardinality(p_hours) = 0 THEN
        RETURN;
    END IF;
    v_sums := _measure.record_sums_sql(v_type, 'r.counters', false, '::bigint');
    v_fresh := _measure.fresh_hours(p_system, v_type, p_hours);
    DELETE FROM _measure.discopen_file_tier f
     WHERE f.system_id = p_system AND f.grain = 'h' AND f.bucket_at = ANY (v_fresh);
    FOR v_day IN SELECT DISTINCT date_trunc('day', h, 'UTC') FROM unnest(v_fresh) h ORDER BY 1 LOOP
        v_hours := ARRAY(SELECT h FROM unnest(v_fresh) h WHERE date_trunc('day', h, 'UTC') = v_day ORDER BY 1);
        v_month := date_trunc('month', v_day, 'UTC');
        v_mask := _measure.hour_bits(v_hours, v_month);
        UPDATE _measure.discopen_open_hours o SET hours = o.hours & ~v_mask
         WHERE o.system_id = p_system AND o.month_at = v_month AND (o.hours & v_mask) <> c_zero;
        EXECUTE format($q$
            WITH r AS MATERIALIZED (  -- (computed where the system's runs are: 130-shard-route.sql)
                SELECT r.* FROM (SELECT count(*) FROM _measure.shard_route WHERE system_id = $1) one
                 CROSS JOIN LATERAL _measure.discopen_rows($1, $2, ARRAY(SELECT h + INTERVAL '1 hour'
                                                                           FROM unnest($2) h ORDER BY 1), NULL) r),
            rb AS (
                SELECT r.*, r.measurement_id AS sel FROM r
                UNION ALL
                SELECT r.*, 0 FROM r WHERE r.best),
            tier AS (
                INSERT INTO _measure.discopen_file_tier (system_id, grain, bucket_at, file_name, measurement_id,
                                                         samples, counters)
                SELECT $1, 'h', r.hour_at, r.file_name, r.sel, sum(r.samples)::integer, %s
                  FROM rb r GROUP BY r.hour_at, r.file_name, r.sel
                RETURNING 1)
            INSERT INTO _measure.discopen_open_hours AS o (system_id, month_at, entity_id, record_at, measurement_id,
                                                           file_name, hours)
            SELECT $1, $3, r.entity_id, r.record_at, r.sel, min(r.file_name),
                   _measure.hour_bits(array_agg(r.hour_at), $3)
              FROM rb r GROUP BY r.entity_id, r.record_at, r.sel
            ON CONFLICT (system_id, month_at, entity_id, record_at, measurement_id)
            DO UPDATE SET hours = o.hours | EXCLUDED.hours$q$, v_sums)
        USING p_system, v_hours, v_month;
        DELETE FROM _measure.discopen_open_hours o
         WHERE o.system_id = p_system AND o.month_at = v_month AND o.hours = c_zero;
    END LOOP;
    PERFORM _measure.condense_discopen_rollup(p_system, 'd', p_hours);
END
$fn$;
GRANT EXECUTE ON FUNCTION _measure.condense_discopen(smallint, timestamptz[]) TO measure_writer;

-- The day ('d') or month ('m') rows of _measure.discopen_file_tier of the UTC days or months
-- of p_hours, from the rows below them (hours, days).
CREATE OR REPLACE FUNCTION _measure.condense_discopen_rollup(p_system smallint, p_grain "char", p_hours timestamptz[])
RETURNS void LANGUAGE plpgsql SET work_mem = '256MB' AS $fn$
DECLARE
    v_type smallint := (SELECT t.type_code FROM _measure.entity_type t WHERE t.entity = 'discopen');
    v_unit interval := CASE p_grain WHEN 'd' THEN INTERVAL '1 day' ELSE INTERVAL '1 month' END;
BEGIN
    IF v_type IS NULL OR p_hours IS NULL OR cardinality(p_hours) = 0 THEN
        RETURN;
    END IF;
    DELETE FROM _measure.discopen_file_tier f
     WHERE f.system_id = p_system AND f.grain = p_grain
       AND f.bucket_at IN (SELECT DISTINCT date_trunc(CASE p_grain WHEN 'd' THEN 'day' ELSE 'month' END, h, 'UTC')
                             FROM unnest(p_hours) h);
    EXECUTE format($q$
        INSERT INTO _measure.discopen_file_tier (system_id, grain, bucket_at, file_name, measurement_id,
                                                 samples, counters)
        SELECT $1, $2, b.lo, r.file_name, r.measurement_id, sum(r.samples)::integer, %s
          FROM (SELECT DISTINCT date_trunc(CASE $2 WHEN 'd' THEN 'day' ELSE 'month' END, h, 'UTC') AS lo
                  FROM unnest($3) h) b
         CROSS JOIN LATERAL (
               SELECT * FROM _measure.discopen_file_tier r
                WHERE r.system_id = $1 AND r.grain = CASE $2 WHEN 'd' THEN 'h' ELSE 'd' END::"char"
                  AND r.bucket_at >= b.lo
                  AND r.bucket_at < (b.lo AT TIME ZONE 'UTC' + $4) AT TIME ZONE 'UTC'
                OFFSET 0) r
         GROUP BY b.lo, r.file_name, r.measurement_id$q$, _measure.record_sums_sql(v_type, 'r.counters', false, '::bigint'))
    USING p_system, p_grain, p_hours, v_unit;
END
$fn$;
GRANT EXECUTE ON FUNCTION _measure.condense_discopen_rollup(smallint, "char", timestamptz[]) TO measure_writer;

-- Per file name, the DISCOPEN interval records with input + output > 0 whose FROM-TIMESTAMP
-- lies in [p_from, p_to) (of one measurement, or per entity-hour of the best one): the opens
-- (counter records) that have one, and the sums of every counter over them.
CREATE OR REPLACE FUNCTION _measure.discopen_window(p_system smallint, p_from timestamptz, p_to timestamptz,
                                                    p_measurement integer)
RETURNS TABLE (file_name text, open_count bigint, c numeric[])
LANGUAGE plpgsql STABLE SET work_mem = '256MB' SET enable_sort = off SET enable_indexscan = off AS $fn$
DECLARE
    v_type smallint := (SELECT t.type_code FROM _measure.entity_type t WHERE t.entity = 'discopen');
    v_grain "char"[];
    v_at timestamptz[];
    v_end timestamptz[];
    v_lo timestamptz[];
    v_hi timestamptz[];
BEGIN
    IF v_type IS NULL THEN
        RETURN;
    END IF;
    SELECT array_agg(p.grain) FILTER (WHERE p.grain <> 'r'), array_agg(p.lo) FILTER (WHERE p.grain <> 'r'),
           array_agg(p.hi) FILTER (WHERE p.grain <> 'r'),
           array_agg(p.lo) FILTER (WHERE p.grain = 'r'), array_agg(p.hi) FILTER (WHERE p.grain = 'r')
      INTO v_grain, v_at, v_end, v_lo, v_hi
      FROM _measure.window_plan(p_system, p_from, p_to) p;
    RETURN QUERY EXECUTE format($q$
        WITH raw AS MATERIALIZED (
            SELECT r.* FROM _measure.discopen_rows($1, $2, $3, $4) r WHERE $4 IS NOT NULL OR r.best),
        pieces AS (SELECT * FROM unnest($5, $6, $7) p (grain, lo, hi)),
        masks AS (
            SELECT date_trunc('month', h, 'UTC') AS month_at,
                   _measure.hour_bits(array_agg(h), date_trunc('month', h, 'UTC')) AS mask
              FROM pieces CROSS JOIN LATERAL generate_series(pieces.lo, pieces.hi - INTERVAL '1 hour', INTERVAL '1 hour') h
             GROUP BY 1),
        opens AS (
            SELECT o.file_name, o.entity_id, o.record_at
              FROM masks k CROSS JOIN LATERAL (
                   SELECT * FROM _measure.discopen_open_hours o
                    WHERE o.system_id = $1 AND o.month_at = k.month_at AND o.measurement_id = coalesce($4, 0)
                      AND (o.hours & k.mask) <> repeat('0', 744)::bit(744)
                    OFFSET 0) o
            UNION
            SELECT raw.file_name, raw.entity_id, raw.record_at FROM raw),
        u AS (
            SELECT f.file_name, f.counters
              FROM pieces p CROSS JOIN LATERAL (
                   SELECT * FROM _measure.discopen_file_tier f
                    WHERE f.system_id = $1 AND f.grain = p.grain AND f.bucket_at = p.lo
                      AND f.measurement_id = coalesce($4, 0)
                    OFFSET 0) f
            UNION ALL
            SELECT raw.file_name, raw.counters FROM raw),
        s AS (SELECT u.file_name, %s AS c FROM u GROUP BY u.file_name)
        SELECT s.file_name, coalesce(n.opens, 0), s.c
          FROM s LEFT JOIN (SELECT opens.file_name, count(*) AS opens FROM opens GROUP BY 1) n USING (file_name)$q$,
        _measure.record_sums_sql(v_type, 'u.counters', false))
    USING p_system, v_lo, v_hi, p_measurement, v_grain, v_at, v_end;
END
$fn$;
GRANT EXECUTE ON FUNCTION _measure.discopen_window(smallint, timestamptz, timestamptz, integer) TO measure_writer;
