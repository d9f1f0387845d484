-- 015-runs: reading and keeping the interval runs (schema/100-interval-runs*.sql).
--
-- A run of _measure.interval_run holds n consecutive interval records of one counter record
-- (measurement_id, entity_id, record_at): interval i (1-based) goes from
-- from_at + (i-1) x delta_us to from_at + i x delta_us, is closed by an interval copy
-- (copy_kind 3) except the last, closed by closing_kind, and its counters are
-- counters[i][1..k] in catalogue order (_measure.counter_def.position). Every FROM of a run
-- lies in the UTC hour of its from_at.
--
-- Readers:
--   _measure.intervals(system, type, lo, hi[, need])  every interval record of an entity type
--       whose FROM lies in [lo, hi), one row per interval with its run's counters `c` and its
--       index `i`: read counter p as c[i][p] (on Citus `c` is the interval's own row and
--       i = 1: 900-citus.citus.sql); with `need` (_measure.counter_mask) only the
--       runs where one of those counters is nonzero. An inlined SQL function (pass it plain
--       values or columns: an argument with a subquery stops the inlining): the planner reads
--       the runs of [lo, hi) by the BRIN index, decompresses each run's counters once (the
--       LATERAL ... OFFSET 0) and computes only the columns the caller uses. Reading
--       c[i][p] of a run read once costs about 0.1 µs; reading counters[i][p] straight from
--       the table would decompress the run again for every value.
--   measure.interval_record, measure.counter_copy (030-api.sql): the 1986 shapes, one row
--       per interval record / copy, for people and small reads.
--
-- Writers: the collector (collector/sink.py) writes whole runs by binary COPY after
-- _measure.run_partitions_for; live collection writes a run per minute, which
-- _measure.pack_runs merges into one run per counter record and hour once the hour is
-- over (_measure.upkeep).

-- ---------------------------------------------------------------- interval arithmetic

-- The first and last interval index of a run whose FROM lies in [p_lo, p_hi) (an empty range
-- when first > last). Infinite ends are open. (Inlined into their callers: they call no
-- STRICT SQL function, which PostgreSQL would run as a query of its own for every run.)
CREATE OR REPLACE FUNCTION measure.run_first(p_from timestamptz, p_delta bigint, p_lo timestamptz)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_lo <= p_from THEN 1
            ELSE least(1 + ((extract(epoch FROM p_lo - p_from) * 1000000)::bigint + p_delta - 1) / p_delta,
                       32767)::integer END;
CREATE OR REPLACE FUNCTION measure.run_last(p_from timestamptz, p_delta bigint, p_hi timestamptz)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_hi <= p_from THEN 0
            WHEN NOT isfinite(p_hi) THEN 32767
            ELSE least(((extract(epoch FROM p_hi - p_from) * 1000000)::bigint + p_delta - 1) / p_delta,
                       32767)::integer END;
DROP FUNCTION IF EXISTS _measure.run_first(timestamptz, bigint, timestamptz);
DROP FUNCTION IF EXISTS _measure.run_last(timestamptz, bigint, timestamptz);
GRANT EXECUTE ON FUNCTION measure.run_first(timestamptz, bigint, timestamptz),
                          measure.run_last(timestamptz, bigint, timestamptz)
    TO measure_writer, measure_api, measure_reader;

-- The intervals of one run (from_at, delta_us, n) whose FROM lies in [p_lo, p_hi): index i,
-- FROM and TO. Inlined into its caller (measure.interval_run readers: MEASREAD).
CREATE OR REPLACE FUNCTION measure.run_intervals(p_from timestamptz, p_delta bigint, p_n integer,
                                                 p_lo timestamptz DEFAULT '-infinity',
                                                 p_hi timestamptz DEFAULT 'infinity')
RETURNS TABLE (i integer, from_at timestamptz, to_at timestamptz)
LANGUAGE sql IMMUTABLE AS $$
    SELECT g.i, p_from + (g.i - 1) * p_delta * INTERVAL '1 microsecond',
           p_from + g.i * p_delta * INTERVAL '1 microsecond'
      FROM generate_series(measure.run_first(p_from, p_delta, p_lo),
                           least(p_n, measure.run_last(p_from, p_delta, p_hi))) g (i)
$$;
GRANT EXECUTE ON FUNCTION measure.run_intervals(timestamptz, bigint, integer, timestamptz, timestamptz)
    TO measure_writer, measure_api, measure_reader;

-- The UTC hour an instant lies in (-infinity and infinity stay as they are).
CREATE OR REPLACE FUNCTION _measure.hour_of(p_at timestamptz)
RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN isfinite(p_at) THEN date_bin(INTERVAL '1 hour', p_at, TIMESTAMPTZ '2000-01-01 00:00:00+00')
            ELSE p_at END;
GRANT EXECUTE ON FUNCTION _measure.hour_of(timestamptz) TO measure_writer;

-- What retention dropped (_measure.purged, schema/100-interval-runs.sql): nothing of a class
-- before its horizon is ever recomputed from the class below; interval runs before
-- _measure.raw_horizon() are gone, so the hour and record tiers of earlier hours are kept as
-- they are.
CREATE OR REPLACE FUNCTION _measure.horizon(p_class text)
RETURNS timestamptz LANGUAGE sql STABLE
RETURN coalesce((SELECT p.purged_before FROM _measure.purged p WHERE p.class = p_class), TIMESTAMPTZ '-infinity');
GRANT EXECUTE ON FUNCTION _measure.horizon(text) TO measure_writer;
CREATE OR REPLACE FUNCTION _measure.raw_horizon()
RETURNS timestamptz LANGUAGE sql STABLE
RETURN _measure.horizon('raw');
GRANT EXECUTE ON FUNCTION _measure.raw_horizon() TO measure_writer;

-- Of the given UTC hours, those whose tiers may be recomputed from the interval runs of an
-- entity type (any type: NULL): the hours after the raw horizon, and earlier hours that
-- hold runs again (history loaded after retention dropped its day: it is condensed, not
-- ignored). The others keep the tiers they have.
CREATE OR REPLACE FUNCTION _measure.fresh_hours(p_system smallint, p_type smallint, p_hours timestamptz[])
RETURNS timestamptz[] LANGUAGE sql STABLE AS $$
    SELECT ARRAY(
        SELECT h FROM unnest(p_hours) h
         WHERE h >= _measure.raw_horizon()
            OR EXISTS (SELECT 1 FROM _measure.interval_run r
                        WHERE r.system_id = p_system AND (p_type IS NULL OR r.type_code = p_type)
                          AND r.from_at >= h AND r.from_at < h + INTERVAL '1 hour')
         ORDER BY h)
$$;
GRANT EXECUTE ON FUNCTION _measure.fresh_hours(smallint, smallint, timestamptz[]) TO measure_writer;

-- ---------------------------------------------------------------- reading

-- A run's counters array detoasted once: every interval of the run then subscripts the copy
-- instead of decompressing the TOASTed array again. A PL/pgSQL function (never inlined), so
-- that it stays one call per run, and PARALLEL SAFE, so that the queries reading intervals can
-- be planned in parallel (the same done with an OFFSET 0 subquery kept every condensing
-- query on one core: measured on a ref16 day, bench/RESULTS.md).
CREATE OR REPLACE FUNCTION _measure.detoasted(p_counters bigint[]) RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    RETURN p_counters || '{}'::bigint[];
END
$$;
GRANT EXECUTE ON FUNCTION _measure.detoasted(bigint[]) TO measure_writer;

-- p_span_lo / p_span_hi (optional) bound the runs read by their start: a caller passing
-- p_lo and p_hi from a LATERAL join (many ranges) passes the hull of its ranges as constants
-- too, so that the planner prunes the partitions outside it (runtime pruning alone still
-- plans every partition: 64 ms a query with a year of daily partitions, 0.3 ms bounded).
DROP FUNCTION IF EXISTS _measure.intervals(smallint, smallint, timestamptz, timestamptz);
DROP FUNCTION IF EXISTS _measure.intervals(smallint, smallint, timestamptz, timestamptz, bigint);
CREATE OR REPLACE FUNCTION _measure.intervals(p_system smallint, p_type smallint, p_lo timestamptz,
                                              p_hi timestamptz, p_need bigint DEFAULT NULL,
                                              p_span_lo timestamptz DEFAULT NULL,
                                              p_span_hi timestamptz DEFAULT NULL)
RETURNS TABLE (system_id smallint, type_code smallint, measurement_id integer, entity_id bigint,
               record_at timestamptz, cpu smallint, error smallint, hour_at timestamptz,
               from_at timestamptz, to_at timestamptz, delta_us bigint, closing_kind smallint,
               run_from timestamptz, i integer, c bigint[])
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT s.system_id, s.type_code, s.measurement_id, s.entity_id, s.record_at, s.cpu, s.error,
           _measure.hour_of(s.from_at),
           s.from_at + (g.i - 1) * s.delta_us * INTERVAL '1 microsecond',
           s.from_at + g.i * s.delta_us * INTERVAL '1 microsecond',
           s.delta_us, CASE WHEN g.i = s.n THEN s.closing_kind ELSE 3::smallint END,
           s.from_at, g.i, d.c
      FROM (SELECT r.*, measure.run_first(r.from_at, r.delta_us, p_lo) AS i0,
                   least(r.n, measure.run_last(r.from_at, r.delta_us, p_hi)) AS i1
              FROM _measure.interval_run r
             WHERE r.system_id = p_system AND r.type_code = p_type
               AND r.from_at >= _measure.hour_of(p_lo) AND r.from_at < p_hi
               AND (p_need IS NULL OR r.nonzero IS NULL OR r.nonzero & p_need <> 0)
               AND (p_span_lo IS NULL OR r.from_at >= p_span_lo)
               AND (p_span_hi IS NULL OR r.from_at < p_span_hi)) s
     CROSS JOIN LATERAL _measure.detoasted(s.counters) AS d (c)
     -- (array_length(d.c, 1) = n: it only makes the intervals depend on the detoasted copy,
     -- so that no plan detoasts the run once per interval)
     CROSS JOIN LATERAL generate_series(s.i0, least(s.i1, array_length(d.c, 1))) AS g (i)
     WHERE s.i0 <= s.i1
$$;
GRANT EXECUTE ON FUNCTION _measure.intervals(smallint, smallint, timestamptz, timestamptz, bigint, timestamptz,
                                              timestamptz) TO measure_writer;

-- The `nonzero` mask of some counters of an entity type (bit p-1 for position p): runs whose
-- mask shares no bit with it have those counters all zero, and _measure.intervals(...,
-- p_need) skips them unread.
CREATE OR REPLACE FUNCTION _measure.counter_mask(p_type smallint, p_counters text[])
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce(bit_or(1::bigint << (d.position - 1)), 0)
      FROM _measure.counter_def d JOIN _measure.entity_type t ON t.entity = d.entity
     WHERE t.type_code = p_type AND d.counter = ANY (p_counters)
$$;
GRANT EXECUTE ON FUNCTION _measure.counter_mask(smallint, text[]) TO measure_writer;

-- The `nonzero` mask of a counters array [interval][counter] (NULL beyond 63 counters).
CREATE OR REPLACE FUNCTION _measure.nonzero_mask(p_counters bigint[])
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN array_length(p_counters, 2) <= 63 THEN
           (SELECT coalesce(bit_or(CASE WHEN u.x <> 0 THEN 1::bigint << ((u.o - 1) % array_length(p_counters, 2))::integer
                                        ELSE 0 END), 0)
              FROM unnest(p_counters) WITH ORDINALITY u (x, o)) END
$$;
GRANT EXECUTE ON FUNCTION _measure.nonzero_mask(bigint[]) TO measure_writer;

-- Which counters of an entity type are levels rather than deltas (copies.py): snapshot,
-- maxq and maxvalue counters carry the value at TO; of those, the STARTING-… / …-START
-- snapshots carry the value at FROM (the copy that opened the interval).
CREATE OR REPLACE VIEW _measure.counter_role AS
SELECT t.type_code, d.entity, d.position, d.counter,
       CASE WHEN d.kind = 'snapshot' AND (d.measure_name LIKE 'STARTING-%' OR d.measure_name LIKE '%-START')
                 THEN 'start'
            WHEN d.kind IN ('snapshot', 'maxq', 'maxvalue') THEN 'level'
            ELSE 'delta' END AS role,
       CASE WHEN d.kind = 'snapshot' AND (d.measure_name LIKE 'STARTING-%' OR d.measure_name LIKE '%-START')
                 THEN count(*) FILTER (WHERE d.kind = 'snapshot'
                                         AND (d.measure_name LIKE 'STARTING-%' OR d.measure_name LIKE '%-START'))
                      OVER (PARTITION BY t.type_code ORDER BY d.position) END AS tail_index
  FROM _measure.counter_def d JOIN _measure.entity_type t ON t.entity = d.entity;
GRANT SELECT ON _measure.counter_role TO measure_writer;

-- ---------------------------------------------------------------- partitions (plain PostgreSQL)

-- Create the daily partitions of _measure.interval_run that [p_lo, p_hi] needs (UTC days);
-- returns how many were created. With TimescaleDB (a hypertable) chunks are created by
-- TimescaleDB and this does nothing. Partitions are named interval_run_pYYYYMMDD.
CREATE OR REPLACE FUNCTION _measure.run_partitions_for(p_lo timestamptz, p_hi timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_day date;
    v_name text;
    v_made integer := 0;
BEGIN
    IF p_lo IS NULL OR p_hi IS NULL
       OR (SELECT c.relkind FROM pg_class c WHERE c.oid = '_measure.interval_run'::regclass) <> 'p' THEN
        RETURN 0;
    END IF;
    FOR v_day IN SELECT generate_series((p_lo AT TIME ZONE 'UTC')::date, (p_hi AT TIME ZONE 'UTC')::date,
                                        INTERVAL '1 day')::date LOOP
        v_name := 'interval_run_p' || to_char(v_day, 'YYYYMMDD');
        CONTINUE WHEN to_regclass('_measure.' || v_name) IS NOT NULL;
        -- two writers creating the same day: the second waits here, then finds it, by a
        -- query of pg_class (a fresh snapshot): to_regclass reads the catalog cache, which an
        -- advisory lock does not refresh, and missed the partition just committed
        PERFORM pg_advisory_xact_lock(0x4D454153, 100);
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_class c WHERE c.relname = v_name
                                 AND c.relnamespace = '_measure'::regnamespace);
        BEGIN
            EXECUTE format('CREATE TABLE _measure.%I PARTITION OF _measure.interval_run '
                           'FOR VALUES FROM (%L) TO (%L) WITH (toast_tuple_target = 128)',
                           v_name, (v_day + time '00:00') AT TIME ZONE 'UTC',
                           (v_day + 1 + time '00:00') AT TIME ZONE 'UTC');
            v_made := v_made + 1;
        EXCEPTION WHEN duplicate_table OR unique_violation THEN
            NULL;   -- made by another writer after all: what was wanted
        END;
    END LOOP;
    RETURN v_made;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.run_partitions_for(timestamptz, timestamptz) TO measure_writer;

-- The raw storage units (partitions or chunks) and the UTC range each holds.
CREATE OR REPLACE FUNCTION _measure.run_parts()
RETURNS TABLE (part regclass, lo timestamptz, hi timestamptz, compressed boolean)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF (SELECT c.relkind FROM pg_class c WHERE c.oid = '_measure.interval_run'::regclass) = 'p' THEN
        RETURN QUERY
        SELECT c.oid::regclass,
               (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)'))[1]::timestamptz,
               (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz,
               false
          FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = '_measure.interval_run'::regclass
         ORDER BY 2;
    ELSE
        RETURN QUERY EXECUTE
            'SELECT format(''%I.%I'', ch.chunk_schema, ch.chunk_name)::regclass, ch.range_start, ch.range_end,
                    ch.is_compressed
               FROM timescaledb_information.chunks ch
              WHERE ch.hypertable_schema = ''_measure'' AND ch.hypertable_name = ''interval_run''
              ORDER BY ch.range_start';
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.run_parts() TO measure_writer;

-- ---------------------------------------------------------------- packing

-- Concatenation of two-dimensional arrays along their first dimension.
CREATE OR REPLACE AGGREGATE _measure.array_cat_agg(anycompatiblearray) (
    SFUNC = array_cat, STYPE = anycompatiblearray);

-- Merge the runs of one UTC hour that continue each other (same counter record,
-- DELTA-TIME, CPU and ERROR, each FROM at the previous run's end, the previous one closed
-- by an interval copy) into one run: the rows derived from them are unchanged. Returns
-- the number of runs removed.
CREATE OR REPLACE FUNCTION _measure.pack_hour(p_hour timestamptz)
RETURNS integer LANGUAGE plpgsql SET work_mem = '256MB' AS $$
DECLARE
    v_removed integer;
BEGIN
    IF to_regclass('pg_temp._pack') IS NULL THEN
        CREATE TEMP TABLE _pack (measurement_id integer, entity_id bigint, record_at timestamptz,
                                 from_at timestamptz, grp bigint) ON COMMIT DROP;
    END IF;
    TRUNCATE _pack;
    INSERT INTO _pack
    SELECT x.measurement_id, x.entity_id, x.record_at, x.from_at,
           count(*) FILTER (WHERE x.brk) OVER (PARTITION BY x.measurement_id, x.entity_id, x.record_at
                                               ORDER BY x.from_at)
      FROM (SELECT r.measurement_id, r.entity_id, r.record_at, r.from_at,
                   (lag(r.from_at + r.n * r.delta_us * INTERVAL '1 microsecond') OVER w IS DISTINCT FROM r.from_at
                    OR lag(r.closing_kind) OVER w <> 3 OR lag(r.delta_us) OVER w <> r.delta_us
                    OR lag(r.cpu) OVER w <> r.cpu OR lag(r.error) OVER w <> r.error
                    OR lag(array_length(r.counters, 2)) OVER w <> array_length(r.counters, 2)) AS brk
              FROM _measure.interval_run r
             WHERE r.from_at >= p_hour AND r.from_at < p_hour + INTERVAL '1 hour'
            WINDOW w AS (PARTITION BY r.measurement_id, r.entity_id, r.record_at ORDER BY r.from_at)) x;
    DELETE FROM _pack p USING (
        SELECT measurement_id, entity_id, record_at, grp FROM _pack
         GROUP BY 1, 2, 3, 4 HAVING count(*) = 1) s
     WHERE (p.measurement_id, p.entity_id, p.record_at, p.grp) = (s.measurement_id, s.entity_id, s.record_at, s.grp);
    IF NOT EXISTS (SELECT 1 FROM _pack) THEN
        RETURN 0;
    END IF;
    WITH gone AS (
        DELETE FROM _measure.interval_run r USING _pack p
         WHERE r.from_at >= p_hour AND r.from_at < p_hour + INTERVAL '1 hour'
           AND (r.measurement_id, r.entity_id, r.record_at, r.from_at)
               = (p.measurement_id, p.entity_id, p.record_at, p.from_at)
        RETURNING r.*, p.grp),
    ends AS (  -- the first run's base and the last run's tail and closing kind
        SELECT g.*, first_value(g.base) OVER w AS first_base, last_value(g.tail) OVER w AS last_tail,
               last_value(g.closing_kind) OVER w AS last_kind
          FROM gone g
        WINDOW w AS (PARTITION BY g.measurement_id, g.entity_id, g.record_at, g.grp ORDER BY g.from_at
                     ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING))
    INSERT INTO _measure.interval_run (system_id, type_code, measurement_id, entity_id, record_at, from_at,
                                       delta_us, n, closing_kind, cpu, error, counters, base, tail, nonzero)
    SELECT min(g.system_id), min(g.type_code), g.measurement_id, g.entity_id, g.record_at, min(g.from_at),
           min(g.delta_us), sum(g.n)::smallint, min(g.last_kind), min(g.cpu), min(g.error),
           _measure.array_cat_agg(g.counters ORDER BY g.from_at), min(g.first_base), min(g.last_tail),
           CASE WHEN count(g.nonzero) = count(*) THEN bit_or(g.nonzero) END
      FROM ends g
     GROUP BY g.measurement_id, g.entity_id, g.record_at, g.grp;
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    RETURN (SELECT count(*) FROM _pack) - v_removed;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.pack_hour(timestamptz) TO measure_writer;

-- Pack the hours of _measure.pack_todo that ended before p_before (oldest first, at most
-- p_limit); returns the runs removed.
CREATE OR REPLACE FUNCTION _measure.pack_runs(p_before timestamptz DEFAULT now(), p_limit integer DEFAULT 48)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_hour timestamptz;
    v_total integer := 0;
BEGIN
    FOR v_hour IN SELECT t.hour_at FROM _measure.pack_todo t
                   WHERE t.hour_at + INTERVAL '1 hour' <= p_before
                   ORDER BY t.hour_at LIMIT p_limit LOOP
        v_total := v_total + _measure.pack_hour(v_hour);
        DELETE FROM _measure.pack_todo WHERE hour_at = v_hour;
    END LOOP;
    RETURN v_total;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.pack_runs(timestamptz, integer) TO measure_writer;

-- ---------------------------------------------------------------- interval records, one row each

-- The interval records as rows of the 1986 shape (counters one-dimensional, catalogue order),
-- unpacked from the runs. measure.interval_record (030-api.sql) is this view for readers.
-- It can be written: rows INSERTed (or COPied) into it are stored as runs when the statement
-- ends (_measure.store_intervals: an interval already stored is kept as it is, the hours are
-- marked for condensing), and DELETE removes single intervals from their runs. Bulk writers
-- (the collector, imports) write runs directly.
CREATE OR REPLACE VIEW _measure.interval_record AS
SELECT s.measurement_id, s.entity_id, s.record_at,
       s.from_at + (g.i - 1) * s.delta_us * INTERVAL '1 microsecond' AS from_at,
       s.from_at + g.i * s.delta_us * INTERVAL '1 microsecond' AS to_at,
       s.delta_us, CASE WHEN g.i = s.n THEN s.closing_kind ELSE 3::smallint END AS closing_kind,
       s.system_id, s.type_code, s.cpu, s.error,
       ARRAY(SELECT x FROM unnest(d.c[g.i:g.i][:]) x) AS counters
  FROM _measure.interval_run s
 CROSS JOIN LATERAL (SELECT s.counters || '{}'::bigint[] AS c OFFSET 0) d
 CROSS JOIN LATERAL generate_series(1, s.n) g (i);
ALTER VIEW _measure.interval_record ALTER COLUMN error SET DEFAULT 0;
GRANT SELECT, INSERT, DELETE ON _measure.interval_record TO measure_writer;

-- Store the interval records staged in pg_temp._interval_in (the columns of
-- _measure.interval_record) as runs, by the collector's rule (collector/sink.py build_runs):
-- per counter record, consecutive intervals of one UTC hour with equal DELTA-TIME, CPU and
-- ERROR and number of counters, ending at an entity-stop or stop. Intervals already stored are
-- skipped; the hours written are marked for condensing and packing (a staged run may continue
-- a stored one).
-- Runs stored this way have no base: their copies (measure.counter_copy) are unknown.
-- Returns the number of intervals stored; empties the staging table.
CREATE OR REPLACE FUNCTION _measure.store_intervals()
RETURNS bigint LANGUAGE plpgsql SET work_mem = '256MB' AS $$
DECLARE
    v_lo timestamptz;
    v_hi timestamptz;
    v_n bigint;
    v_bad record;
BEGIN
    IF to_regclass('pg_temp._interval_in') IS NULL THEN
        RETURN 0;
    END IF;
    SELECT * INTO v_bad FROM pg_temp._interval_in i
     WHERE i.to_at <> i.from_at + i.delta_us * INTERVAL '1 microsecond' OR i.delta_us <= 0
        OR i.closing_kind NOT BETWEEN 3 AND 5 OR array_ndims(i.counters) IS DISTINCT FROM 1
     LIMIT 1;
    IF FOUND THEN
        TRUNCATE pg_temp._interval_in;
        RAISE EXCEPTION 'interval record of entity % from % is inconsistent: to_at must be from_at + delta_us '
                        '(delta_us > 0), closing_kind 3-5 and counters a one-dimensional array of at least one counter',
                        v_bad.entity_id, v_bad.from_at USING ERRCODE = '22023';
    END IF;
    SELECT min(from_at), max(from_at) INTO v_lo, v_hi FROM pg_temp._interval_in;
    IF v_lo IS NULL THEN
        RETURN 0;
    END IF;
    -- intervals already stored are skipped (only looked for where runs of those records exist)
    IF EXISTS (SELECT 1 FROM _measure.interval_run r
                WHERE r.from_at >= _measure.hour_of(v_lo) AND r.from_at <= v_hi
                  AND (r.measurement_id, r.entity_id) IN (SELECT DISTINCT measurement_id, entity_id
                                                            FROM pg_temp._interval_in)) THEN
        DELETE FROM pg_temp._interval_in i
         WHERE EXISTS (SELECT 1 FROM _measure.interval_run r
                        WHERE r.measurement_id = i.measurement_id AND r.entity_id = i.entity_id
                          AND r.record_at = i.record_at
                          AND r.from_at <= i.from_at AND r.from_at > i.from_at - INTERVAL '1 hour'
                          AND i.from_at < r.from_at + r.n * r.delta_us * INTERVAL '1 microsecond'
                          AND (extract(epoch FROM i.from_at - r.from_at) * 1000000)::bigint % r.delta_us = 0);
    END IF;
    SELECT min(from_at), max(from_at), count(*) INTO v_lo, v_hi, v_n FROM pg_temp._interval_in;
    IF v_n = 0 THEN
        RETURN 0;
    END IF;
    PERFORM _measure.run_partitions_for(v_lo, v_hi);
    INSERT INTO _measure.interval_run (system_id, type_code, measurement_id, entity_id, record_at, from_at,
                                       delta_us, n, closing_kind, cpu, error, counters, nonzero)
    SELECT x.*, _measure.nonzero_mask(x.counters) FROM (
    WITH r AS (
        SELECT i.*,
               lag(i.to_at) OVER w AS p_to, lag(i.from_at) OVER w AS p_from,
               lag(i.delta_us) OVER w AS p_delta, lag(i.closing_kind) OVER w AS p_kind,
               lag(i.cpu) OVER w AS p_cpu, lag(i.error) OVER w AS p_error,
               lag(cardinality(i.counters)) OVER w AS p_len
          FROM pg_temp._interval_in i
        WINDOW w AS (PARTITION BY i.measurement_id, i.entity_id, i.record_at ORDER BY i.from_at)),
    g AS (
        SELECT r.*, count(*) FILTER (
                   WHERE r.p_to IS DISTINCT FROM r.from_at OR r.p_kind <> 3 OR r.p_delta <> r.delta_us
                      OR r.p_cpu <> r.cpu OR r.p_error <> r.error OR r.p_len <> cardinality(r.counters)
                      OR _measure.hour_of(r.p_from) <> _measure.hour_of(r.from_at))
               OVER (PARTITION BY r.measurement_id, r.entity_id, r.record_at ORDER BY r.from_at) AS run_no
          FROM r)
    SELECT min(g.system_id), min(g.type_code), g.measurement_id, g.entity_id, g.record_at, min(g.from_at),
           min(g.delta_us), count(*)::smallint, (array_agg(g.closing_kind ORDER BY g.from_at DESC))[1],
           min(g.cpu), coalesce(min(g.error), 0), array_agg(g.counters ORDER BY g.from_at) AS counters
      FROM g
     GROUP BY g.measurement_id, g.entity_id, g.record_at, g.run_no) x;
    PERFORM _measure.note_intervals(x.system_id, x.lo, x.hi)
       FROM (SELECT system_id, min(from_at) AS lo, max(from_at) AS hi FROM pg_temp._interval_in GROUP BY 1) x;
    INSERT INTO _measure.pack_todo (hour_at)
    SELECT DISTINCT _measure.hour_of(from_at) FROM pg_temp._interval_in
    ON CONFLICT (hour_at) DO UPDATE SET noted_at = now();
    TRUNCATE pg_temp._interval_in;
    RETURN v_n;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.store_intervals() TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.interval_record_staged() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF to_regclass('pg_temp._interval_in') IS NULL THEN
            CREATE TEMP TABLE _interval_in (LIKE _measure.interval_record);
        END IF;
        INSERT INTO pg_temp._interval_in VALUES (NEW.*);
        RETURN NEW;
    END IF;
    IF to_regclass('pg_temp._interval_out') IS NULL THEN
        CREATE TEMP TABLE _interval_out (measurement_id integer, entity_id bigint, record_at timestamptz,
                                         from_at timestamptz);
    END IF;
    INSERT INTO pg_temp._interval_out VALUES (OLD.measurement_id, OLD.entity_id, OLD.record_at, OLD.from_at);
    RETURN OLD;
END
$$;

-- After a DELETE through the view: the runs that lost intervals are stored again without them.
CREATE OR REPLACE FUNCTION _measure.interval_record_written() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM _measure.store_intervals();
        RETURN NULL;
    END IF;
    IF to_regclass('pg_temp._interval_out') IS NULL THEN
        RETURN NULL;
    END IF;
    IF to_regclass('pg_temp._interval_in') IS NULL THEN
        CREATE TEMP TABLE _interval_in (LIKE _measure.interval_record);
    END IF;
    WITH hit AS (
        SELECT DISTINCT r.measurement_id, r.entity_id, r.record_at, r.from_at
          FROM pg_temp._interval_out o JOIN _measure.interval_run r
            ON r.measurement_id = o.measurement_id AND r.entity_id = o.entity_id AND r.record_at = o.record_at
           AND r.from_at <= o.from_at AND r.from_at > o.from_at - INTERVAL '1 hour'
           AND o.from_at < r.from_at + r.n * r.delta_us * INTERVAL '1 microsecond'),
    gone AS (
        DELETE FROM _measure.interval_run r USING hit
         WHERE (r.measurement_id, r.entity_id, r.record_at, r.from_at)
               = (hit.measurement_id, hit.entity_id, hit.record_at, hit.from_at)
        RETURNING r.*)
    INSERT INTO pg_temp._interval_in
    SELECT s.measurement_id, s.entity_id, s.record_at,
           s.from_at + (g.i - 1) * s.delta_us * INTERVAL '1 microsecond',
           s.from_at + g.i * s.delta_us * INTERVAL '1 microsecond',
           s.delta_us, CASE WHEN g.i = s.n THEN s.closing_kind ELSE 3::smallint END,
           s.system_id, s.type_code, s.cpu, s.error, ARRAY(SELECT x FROM unnest(s.counters[g.i:g.i][:]) x)
      FROM gone s CROSS JOIN LATERAL generate_series(1, s.n) g (i)
     WHERE NOT EXISTS (SELECT 1 FROM pg_temp._interval_out o
                        WHERE (o.measurement_id, o.entity_id, o.record_at)
                              = (s.measurement_id, s.entity_id, s.record_at)
                          AND o.from_at = s.from_at + (g.i - 1) * s.delta_us * INTERVAL '1 microsecond');
    -- their hours are condensed again without the deleted intervals
    PERFORM _measure.note_intervals(x.system_id, x.lo, x.hi)
       FROM (SELECT r.system_id, min(o.from_at) AS lo, max(o.from_at) AS hi
               FROM pg_temp._interval_out o JOIN _measure.measurement r USING (measurement_id)
              GROUP BY 1) x;
    TRUNCATE pg_temp._interval_out;
    PERFORM _measure.store_intervals();
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS interval_record_insert ON _measure.interval_record;
DROP TRIGGER IF EXISTS interval_record_delete ON _measure.interval_record;
DROP TRIGGER IF EXISTS interval_record_inserted ON _measure.interval_record;
DROP TRIGGER IF EXISTS interval_record_deleted ON _measure.interval_record;
CREATE TRIGGER interval_record_insert INSTEAD OF INSERT ON _measure.interval_record
    FOR EACH ROW EXECUTE FUNCTION _measure.interval_record_staged();
CREATE TRIGGER interval_record_delete INSTEAD OF DELETE ON _measure.interval_record
    FOR EACH ROW EXECUTE FUNCTION _measure.interval_record_staged();
CREATE TRIGGER interval_record_inserted AFTER INSERT ON _measure.interval_record
    FOR EACH STATEMENT EXECUTE FUNCTION _measure.interval_record_written();
CREATE TRIGGER interval_record_deleted AFTER DELETE ON _measure.interval_record
    FOR EACH STATEMENT EXECUTE FUNCTION _measure.interval_record_written();
