-- 900-citus (Citus only): runs after every other idempotent file.

SET LOCAL citus.enable_ddl_propagation = on;

-- ---------------------------------------------------------------- Citus versions of functions
-- Same signature and result as the function they replace (named in each comment); only the
-- SQL differs where Citus refuses the original.

-- _measure.note_intervals (020-tiers.sql): Citus wants the DO UPDATE SET of an INSERT into a
-- distributed table free of non-immutable functions: now() comes in with the row.
CREATE OR REPLACE FUNCTION _measure.note_intervals(p_system smallint, p_from timestamptz,
                                                   p_to timestamptz)
RETURNS integer LANGUAGE sql AS $$
    WITH marked AS (
        INSERT INTO _measure.tier_dirty AS d (system_id, hour_at, noted_at)
        SELECT p_system, h, now()
          FROM generate_series(date_bin(INTERVAL '1 hour', p_from, TIMESTAMPTZ '2000-01-01 00:00:00+00'),
                               p_to, INTERVAL '1 hour') h
        ON CONFLICT (system_id, hour_at) DO UPDATE SET noted_at = excluded.noted_at
        RETURNING 1)
    SELECT count(*)::integer FROM marked
$$;

-- measure.report_condensation_check (045-schedule.sql): the same report, its per-hour tests of
-- the dirty hours, shift and month tiers computed once each (materialised) and joined, not
-- correlated subqueries: Citus runs no subquery that correlates a distributed table with the
-- rows of a CTE ("complex joins are only supported when ..."). tests/citus compares it with the
-- plain one; keep the two alike.
CREATE OR REPLACE FUNCTION measure.report_condensation_check(p_system text, p_day date)
RETURNS TABLE (hour_at timestamptz, time_of_day text, loadid text, shift_day date, shift_no smallint,
               measured integer, condensed integer, coverage_min numeric, pending boolean,
               shift_tier boolean, month_tier boolean, problems text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET work_mem = '64MB' AS $$
    WITH sys AS (
        SELECT s.system_id AS id, s.time_zone AS tz,
               (p_day + time '00:00') AT TIME ZONE s.time_zone AS lo,
               (p_day + 1 + time '00:00') AT TIME ZONE s.time_zone AS hi
          FROM _measure.system s WHERE s.system_id = measure.system_id_of(p_system)),
    hours AS (
        SELECT h AS hour_at FROM sys, generate_series(sys.lo, sys.hi - INTERVAL '1 hour', INTERVAL '1 hour') h),
    raw AS (  -- distinct (hour, entity) by hashing: a ref16 day is 360,000 runs
        SELECT x.hour_at, count(*)::integer AS n
          FROM (SELECT DISTINCT _measure.hour_of(r.from_at) AS hour_at, r.entity_id
                  FROM sys, _measure.interval_run r
                 WHERE r.system_id = sys.id AND r.from_at >= sys.lo AND r.from_at < sys.hi
                   AND r.type_code = ANY (ARRAY(SELECT type_code FROM _measure.entity_type   -- a filter
                          WHERE entity IN ('cpu', 'disc', 'line', 'process', 'userdef', 'tmf')))) x   -- of the scan
         GROUP BY 1),
    tier AS (
        SELECT t.hour_at, count(DISTINCT t.entity_id)::integer AS n,
               min(t.elapsed_us / 3.6e9) FILTER (WHERE t.is_cpu) AS coverage_min
          FROM sys, (SELECT system_id, hour_at, entity_id, elapsed_us, true AS is_cpu FROM _measure.cpu_hour_best
                     UNION ALL SELECT system_id, hour_at, entity_id, elapsed_us, false FROM _measure.disc_hour
                     UNION ALL SELECT system_id, hour_at, entity_id, elapsed_us, false FROM _measure.line_hour
                     UNION ALL SELECT system_id, hour_at, entity_id, elapsed_us, false FROM _measure.process_hour
                     UNION ALL SELECT system_id, hour_at, entity_id, elapsed_us, false FROM _measure.userdef_hour
                     UNION ALL SELECT system_id, hour_at, entity_id, elapsed_us, false FROM _measure.tmf_hour) t
         WHERE t.system_id = sys.id AND t.hour_at >= sys.lo AND t.hour_at < sys.hi
         GROUP BY t.hour_at),
    sh AS MATERIALIZED (
        SELECT h.hour_at, s.shift_day, s.shift_no
          FROM sys CROSS JOIN hours h LEFT JOIN LATERAL _measure.shift_of(sys.id, h.hour_at) s ON true),
    dirty AS MATERIALIZED (
        SELECT d.hour_at FROM sys, _measure.tier_dirty d
         WHERE d.system_id = sys.id AND d.hour_at >= sys.lo AND d.hour_at < sys.hi),
    shift_tier AS MATERIALIZED (
        SELECT DISTINCT ts.shift_day, ts.shift_no FROM sys, _measure.tier_shift ts
         WHERE ts.system_id = sys.id AND (ts.shift_day, ts.shift_no) IN (SELECT shift_day, shift_no FROM sh)),
    month_tier AS MATERIALIZED (
        SELECT DISTINCT tm.month, tm.shift_no FROM sys, _measure.tier_month tm
         WHERE tm.system_id = sys.id
           AND (tm.month, tm.shift_no) IN (SELECT date_trunc('month', shift_day)::date, shift_no FROM sh)),
    checked AS (
        SELECT h.hour_at, (h.hour_at AT TIME ZONE sys.tz) AS local_hour, sh.shift_day, sh.shift_no,
               coalesce(raw.n, 0) AS measured, coalesce(tier.n, 0) AS condensed,
               round(tier.coverage_min, 4) AS coverage_min,
               dirty.hour_at IS NOT NULL AS pending,
               st.shift_day IS NOT NULL AS shift_tier,
               mt.month IS NOT NULL AS month_tier
          FROM sys CROSS JOIN hours h
          LEFT JOIN raw USING (hour_at)
          LEFT JOIN tier USING (hour_at)
          JOIN sh USING (hour_at)
          LEFT JOIN dirty USING (hour_at)
          LEFT JOIN shift_tier st ON st.shift_day = sh.shift_day AND st.shift_no = sh.shift_no
          LEFT JOIN month_tier mt ON mt.month = date_trunc('month', sh.shift_day)::date AND mt.shift_no = sh.shift_no)
    SELECT c.hour_at, to_char(c.local_hour, 'HH24:MI'), measure.loadid(c.local_hour), c.shift_day, c.shift_no,
           c.measured, c.condensed, c.coverage_min, c.pending, c.shift_tier, c.month_tier,
           array_to_string(p.problems, ', ')
      FROM checked c
     CROSS JOIN LATERAL (SELECT array_remove(ARRAY[
               CASE WHEN c.measured = 0 AND c.condensed = 0 THEN 'no data' END,
               CASE WHEN c.measured > 0 AND c.condensed = 0 THEN 'not condensed' END,
               CASE WHEN c.pending THEN 'pending' END,
               CASE WHEN c.condensed > 0 AND c.condensed < c.measured THEN 'partly condensed' END,
               CASE WHEN c.coverage_min < 0.999 THEN 'partial coverage' END,
               CASE WHEN c.condensed > 0 AND NOT c.shift_tier THEN 'no shift tier' END,
               CASE WHEN c.condensed > 0 AND NOT c.month_tier THEN 'no month tier' END], NULL) AS problems) p
     WHERE cardinality(p.problems) > 0
     ORDER BY c.hour_at
$$;

-- measure.report_capacity_forecast (025-reports.sql): the same report, the month peaks grouped
-- per entity and subject, then joined, not a lateral subquery per fitted line: Citus runs no
-- lateral join from a CTE into a distributed table ("cannot perform a lateral outer join when
-- a distributed subquery references complex subqueries, CTEs or local tables"). tests/citus
-- compares it with the plain one; keep the two alike.
CREATE OR REPLACE FUNCTION measure.report_capacity_forecast(p_system text, p_from date, p_to date,
                                                            p_capacity numeric DEFAULT 70)
RETURNS TABLE (entity text, subject text, days bigint, peak_busy_first numeric, peak_busy_last numeric,
               slope_per_day numeric, crossing_date date, crossing_early date, crossing_late date,
               month_peak numeric, busy_if_one_halted numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH d AS (
        SELECT t.entity, t.subject, t.shift_day AS day, max(t.vmax) AS peak
          FROM _measure.tier_shift t
         WHERE t.system_id = measure.system_id_of(p_system) AND t.item = 'busy'
           AND t.entity IN ('cpu', 'disc') AND t.shift_day BETWEEN p_from AND p_to
         GROUP BY 1, 2, 3),
    fit AS (
        SELECT entity, subject, count(*) AS days,
               regr_slope(peak, day - p_from)::numeric AS slope, regr_intercept(peak, day - p_from)::numeric AS icpt,
               (array_agg(peak ORDER BY day))[1] AS first_peak,
               (array_agg(peak ORDER BY day DESC))[1] AS last_peak
          FROM d GROUP BY 1, 2),
    ncpu AS (SELECT count(*) AS n FROM fit WHERE entity = 'cpu'),
    m AS (
        SELECT tm.entity, tm.subject, max(tm.vmax) AS month_peak FROM _measure.tier_month tm
         WHERE tm.system_id = measure.system_id_of(p_system) AND tm.entity IN ('cpu', 'disc') AND tm.item = 'busy'
           AND tm.month BETWEEN date_trunc('month', p_from)::date AND p_to
         GROUP BY 1, 2),
    cross_at AS (
        SELECT f.*, m.month_peak,
               CASE WHEN f.slope > 0 THEN p_from + ceil((p_capacity - f.icpt) / f.slope)::integer END AS at_est,
               CASE WHEN f.slope > 0 THEN p_from + ceil((p_capacity / 1.15 - f.icpt) / f.slope)::integer END AS at_early,
               CASE WHEN f.slope > 0 THEN p_from + ceil((p_capacity / 0.85 - f.icpt) / f.slope)::integer END AS at_late
          FROM fit f
          LEFT JOIN m ON m.entity = f.entity AND m.subject = f.subject)
    SELECT c.entity, c.subject, c.days, round(c.first_peak, 3), round(c.last_peak, 3), round(c.slope, 6),
           CASE WHEN c.at_est IS NOT NULL THEN greatest(c.at_est, p_from) END,
           CASE WHEN c.at_early IS NOT NULL THEN greatest(c.at_early, p_from) END,
           CASE WHEN c.at_late IS NOT NULL THEN greatest(c.at_late, p_from) END,
           round(c.month_peak, 3),
           CASE WHEN c.entity = 'cpu' AND (SELECT n FROM ncpu) > 1 THEN round(c.last_peak + (
               SELECT max(o.last_peak) FROM fit o WHERE o.entity = 'cpu' AND o.subject <> c.subject)
               / ((SELECT n FROM ncpu) - 1), 3) END
      FROM cross_at c
     ORDER BY c.entity, CASE WHEN c.entity = 'cpu' THEN lpad(c.subject, 4, '0') ELSE c.subject END
$$;

-- SQL functions written with a SQL-standard body (RETURN expr) become the same function with
-- a string body: Citus 14 on PostgreSQL 18 cannot run a non-inlined SQL-standard body that
-- reads a Citus table (it re-parses the function's empty source text: "syntax error at or
-- near RETURN"). Same expression, same attributes; names were resolved when it was made and
-- pg_get_functiondef prints them qualified.
DO $citus$
DECLARE
    v_fn regprocedure;
    v_def text;
    v_at integer;
BEGIN
    FOR v_fn IN
        SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname IN ('_measure', 'measure') AND p.prosqlbody IS NOT NULL
    LOOP
        v_def := pg_get_functiondef(v_fn);
        v_at := strpos(v_def, E'\nRETURN ');
        IF v_at = 0 THEN
            RAISE EXCEPTION 'Citus: % has a SQL-standard body that is not RETURN expr; give it a string body', v_fn;
        END IF;
        EXECUTE left(v_def, v_at) || E'AS $citus_body$\nSELECT ' || rtrim(substr(v_def, v_at + 8), E'\n')
                || E'\n$citus_body$';
    END LOOP;
END
$citus$;

-- Functions that read a Citus table (directly, through a view or through another such
-- function), and how Citus may run them.
--
-- * SQL functions among them are never inlined. Citus decides whether a query is distributed
--   before PostgreSQL inlines the SQL functions in it: a query that names no Citus table
--   itself (SELECT * FROM measure.cpu_series(...), or RETURN QUERY ... FROM
--   _measure.intervals(...) in PL/pgSQL) is planned as a local query, and the inlined body
--   then either fails ("parameterized queries for SQL functions referencing distributed tables
--   are not supported") or reads the coordinator's empty shell of the table: no rows and no
--   error. Not inlined, the function's own query is planned by Citus with its parameters bound
--   (PostgreSQL 18 plans SQL functions like PL/pgSQL) and routed to the shard of its system.
--   Any SET clause stops inlining: they get the one below.
-- * All of them may run a distributed query when a query that Citus pushed down to a shard
--   calls them on a worker (citus.allow_nested_distributed_execution; Citus refuses such a
--   "nested distributed query" by default). What they read there is local to that worker:
--   the reference tables (a copy on every node) and the shard group of the one system they
--   are given (p_system), which is the shard group of the query that calls them (a report of
--   a system is one shard group; a query over every system calls them with each row's own
--   system). Local execution runs it in the worker's own transaction, which sees the caller's
--   writes.
DO $citus$
DECLARE
    v_names text[];
    v_more text[];
    v_fn regprocedure;
BEGIN
    SELECT array_agg(c.relname::text) INTO v_names
      FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
     WHERE c.relnamespace = '_measure'::regnamespace;
    LOOP  -- the views and functions reading them, until no more are found
        SELECT array_agg(DISTINCT x.name) INTO v_more FROM (
            SELECT c.relname::text AS name FROM pg_class c
             WHERE c.relnamespace IN ('_measure'::regnamespace, 'measure'::regnamespace) AND c.relkind IN ('v', 'm')
               AND pg_get_viewdef(c.oid) ~ ('measure\.(' || array_to_string(v_names, '|') || ')\M')
            UNION ALL
            SELECT p.proname::text FROM pg_proc p
             WHERE p.pronamespace IN ('_measure'::regnamespace, 'measure'::regnamespace)
               AND p.prolang IN (SELECT oid FROM pg_language WHERE lanname IN ('sql', 'plpgsql'))
               AND p.prosrc ~ ('measure\.(' || array_to_string(v_names, '|') || ')\M')) x
         WHERE x.name <> ALL (v_names);
        EXIT WHEN v_more IS NULL;
        v_names := v_names || v_more;
    END LOOP;
    FOR v_fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace IN ('_measure'::regnamespace, 'measure'::regnamespace) AND p.prokind = 'f'
           AND p.prolang IN (SELECT oid FROM pg_language WHERE lanname IN ('sql', 'plpgsql'))
           AND p.prorettype <> 'trigger'::regtype AND p.proname = ANY (v_names)
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET citus.allow_nested_distributed_execution = on', v_fn);
    END LOOP;
END
$citus$;

-- A function planned once per session (plan_cache_mode = force_generic_plan: its statements
-- are index ranges whatever the arguments) is planned with its arguments on Citus: Citus
-- routes a statement to the shard of its system only with the system known, and refuses a
-- generic plan over distributed tables ("could not create distributed plan").
DO $citus$
DECLARE
    v_fn regprocedure;
BEGIN
    FOR v_fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace IN ('_measure'::regnamespace, 'measure'::regnamespace)
           AND 'plan_cache_mode=force_generic_plan' = ANY (p.proconfig)
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan', v_fn);
    END LOOP;
END
$citus$;

-- Every function of _measure and measure on every node: a query Citus pushes down to a shard
-- calls them there. Re-created from its own definition, which Citus propagates (and records,
-- so a worker added later gets them too).
DO $citus$
DECLARE
    v_fn regprocedure;
BEGIN
    FOR v_fn IN
        SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname IN ('_measure', 'measure') AND p.prokind IN ('f', 'p')
           AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                              AND d.objid = p.oid AND d.deptype = 'e')
         ORDER BY p.oid
    LOOP
        EXECUTE pg_get_functiondef(v_fn);
    END LOOP;
    -- an aggregate (_measure.array_cat_agg) has no function definition to run: Citus creates
    -- it on the workers once asked to
    FOR v_fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace IN ('_measure'::regnamespace, 'measure'::regnamespace) AND p.prokind = 'a'
           AND NOT EXISTS (SELECT 1 FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid)
    LOOP
        PERFORM create_distributed_function(v_fn);
    END LOOP;
END
$citus$;

-- Every view of _measure and measure over Citus tables on every node too: a query that reads
-- a view's whole row (SELECT v::text FROM measure.cpu_hour v) is pushed down to the shards
-- with the view's row type, which must exist there. Re-created from its own definition, in
-- the order they were made (a view after the views it reads); views over the coordinator's
-- own tables stay on the coordinator. (The coordinator keeps the column defaults of a view,
-- such as _measure.interval_record's, which only a write through the view uses.)
DO $citus$
DECLARE
    v_view regclass;
BEGIN
    FOR v_view IN
        SELECT c.oid::regclass FROM pg_class c
         WHERE c.relnamespace IN ('_measure'::regnamespace, 'measure'::regnamespace) AND c.relkind = 'v'
           AND NOT EXISTS (  -- (a view over a plain table of the coordinator: not on the workers)
               SELECT 1 FROM pg_depend d JOIN pg_rewrite w ON w.oid = d.objid
                 JOIN pg_class t ON t.oid = d.refobjid
                WHERE w.ev_class = c.oid AND d.classid = 'pg_rewrite'::regclass
                  AND d.refclassid = 'pg_class'::regclass AND t.relkind IN ('r', 'p')
                  AND t.relnamespace = '_measure'::regnamespace
                  AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = t.oid))
         ORDER BY c.oid
    LOOP
        EXECUTE format('CREATE OR REPLACE VIEW %s AS %s', v_view, pg_get_viewdef(v_view));
    END LOOP;
END
$citus$;

-- A PL/pgSQL function that modifies the shards of several systems in one transaction (retention,
-- condensing every system) must use one connection per worker: Citus refuses to read or write
-- a shard placement that another connection of the same transaction modified. A single
-- system's work is one shard group on one worker and is not slowed by this.
DO $citus$
DECLARE
    v_fn regprocedure;
BEGIN
    FOR v_fn IN
        SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname IN ('_measure', 'measure') AND p.prokind = 'f'
           AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql')
           AND p.prorettype <> 'trigger'::regtype
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET citus.multi_shard_modify_mode = sequential', v_fn);
    END LOOP;
END
$citus$;

-- ---------------------------------------------------------------- the roles on the workers
-- A query through the coordinator reaches the shards as the session's current role: the API's
-- measure_api (SET ROLE), Grafana's member of measure_reader. So on Citus:
-- * those roles may read the distributed and reference tables themselves (shards carry their
--   table's grants, so the grant is made on the coordinator's table): on one node they read
--   them only through the measure views, whose owner reads the tables; a worker checks the
--   shard against the role. The coordinator's own tables (tokens, the collector's
--   bookkeeping, the purge log) are not on the workers and stay out of reach.
-- * the group roles, which never log in to the coordinator, log in to the workers (the
--   coordinator connects as them): there only, made by the schema runner after this
--   transaction (collector/schema.py, prepare_workers), again on every run for a worker added
--   since. Let the workers accept them from the coordinator alone (pg_hba.conf).
-- * every function keeps on the workers the EXECUTE grants it has on the coordinator
--   (re-created there above, it would otherwise be executable by PUBLIC).
GRANT USAGE ON SCHEMA _measure TO measure_api, measure_reader;
DO $citus$
DECLARE
    v_rel regclass;
    v_fn regprocedure;
    v_grantee text;
BEGIN
    FOR v_rel IN
        SELECT p.logicalrelid FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
         WHERE c.relnamespace = '_measure'::regnamespace AND NOT c.relispartition
    LOOP
        EXECUTE format('GRANT SELECT ON %s TO measure_api, measure_reader', v_rel);
    END LOOP;
    FOR v_fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace IN ('_measure'::regnamespace, 'measure'::regnamespace) AND p.proacl IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                              AND d.objid = p.oid AND d.deptype = 'e')
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_proc p, aclexplode(p.proacl) a WHERE p.oid = v_fn AND a.grantee = 0) THEN
            EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn);
        END IF;
        FOR v_grantee IN
            SELECT quote_ident(r.rolname) FROM pg_proc p, aclexplode(p.proacl) a JOIN pg_roles r ON r.oid = a.grantee
             WHERE p.oid = v_fn AND a.grantee <> p.proowner
        LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', v_fn, v_grantee);
        END LOOP;
    END LOOP;
END
$citus$;

-- ---------------------------------------------------------------- no api-cache triggers on Citus tables
-- The api-cache triggers of 032-api-cache.sql never fire for a Citus table (its writes run on
-- the shards; the API's cache is off on Citus, api/cache.py), and a worker added later would
-- get them on its copies of the reference tables, where their NOTIFY fails every transaction
-- ("cannot PREPARE a transaction that has executed ... NOTIFY"): removed from the
-- coordinator's tables, where they are; the coordinator's own tables keep theirs.
SET LOCAL citus.enable_ddl_propagation = off;
DO $citus$
DECLARE
    v_rel regclass;
BEGIN
    FOR v_rel IN
        SELECT t.tgrelid::regclass FROM pg_trigger t JOIN pg_dist_partition p ON p.logicalrelid = t.tgrelid
         WHERE t.tgname = 'api_cache_notify' AND NOT t.tgisinternal
    LOOP
        EXECUTE format('DROP TRIGGER api_cache_notify ON %s', v_rel);
    END LOOP;
END
$citus$;
SET LOCAL citus.enable_ddl_propagation = on;
