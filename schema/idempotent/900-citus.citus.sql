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

-- _measure.intervals (015-runs.sql): each interval carries its own row of the run's counters
-- (c = that row as a one-row array, i = 1), not the whole run's array. One node inlines the
-- function, and the intervals of a run share its detoasted array; on Citus it is never inlined
-- (below), so every interval it returns is copied into the function's result, with its run's
-- whole array: for the 192,000 terminal intervals of two hours of one system, 3.3 s against
-- 0.25 s with its own row (ir.c[ir.i][p], as every caller subscripts it, is the same value).
DO $citus$
DECLARE
    v_def text := pg_get_functiondef('_measure.intervals(smallint, smallint, timestamptz, timestamptz, bigint,
                                                         timestamptz, timestamptz)'::regprocedure);
    c_whole CONSTANT text := E's.from_at, g.i, d.c\n';
BEGIN
    IF strpos(v_def, c_whole) = 0 THEN
        RAISE EXCEPTION 'Citus: _measure.intervals no longer ends its select list with %; update 900-citus.citus.sql', c_whole;
    END IF;
    EXECUTE replace(v_def, c_whole, E's.from_at, 1, d.c[g.i:g.i]\n');
END
$citus$;

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
--   transaction (core/schema.py, prepare_workers), again on every run for a worker added
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

-- ---------------------------------------------------------------- triggers of reference tables
-- A write to a reference table through the coordinator runs on its placements (the
-- coordinator's own copy and one per worker) and fires no trigger of the coordinator's table
-- itself. The triggers of a reference table (_measure.threshold's, which re-resolve the stored
-- violations in the editing transaction: 040-dashboards.sql) are moved to its copy on the
-- coordinator, where every write to it runs (locally, in the writing transaction, after the
-- workers' copies are written), and fire there once per statement, as on one node. None stays
-- on the coordinator's table, from which Citus would copy it to the placements of a worker
-- added later (where it would fire on every write as well). The coordinator must hold a copy
-- of the reference tables: it is in the cluster's metadata (citus_set_coordinator_host).
SET LOCAL citus.enable_ddl_propagation = off;
DO $citus$
DECLARE
    v_rel regclass;
    v_placement regclass;
    v_trigger record;
BEGIN
    FOR v_rel IN
        SELECT DISTINCT t.tgrelid::regclass FROM pg_trigger t JOIN pg_dist_partition p ON p.logicalrelid = t.tgrelid
         WHERE p.partmethod = 'n' AND p.repmodel = 't' AND NOT t.tgisinternal
           AND t.tgfoid <> 'citus_truncate_trigger()'::regprocedure
           AND t.tgrelid::regclass::text LIKE '\_measure.%'
    LOOP
        SELECT to_regclass(shard_name(v_rel, s.shardid)) INTO v_placement
          FROM pg_dist_shard s JOIN pg_dist_placement pl ON pl.shardid = s.shardid
         WHERE s.logicalrelid = v_rel AND pl.groupid = 0;
        IF v_placement IS NULL THEN
            RAISE EXCEPTION 'Citus: the coordinator holds no copy of the reference table %, whose triggers must run there', v_rel
                USING HINT = 'on the coordinator: SELECT citus_set_coordinator_host(''host'', port), then apply the schema again';
        END IF;
        FOR v_trigger IN
            SELECT t.tgname FROM pg_trigger t WHERE t.tgrelid = v_placement AND NOT t.tgisinternal
        LOOP
            EXECUTE format('DROP TRIGGER %I ON %s', v_trigger.tgname, v_placement);
        END LOOP;
        FOR v_trigger IN
            SELECT t.tgname, pg_get_triggerdef(t.oid) AS def FROM pg_trigger t
             WHERE t.tgrelid = v_rel AND NOT t.tgisinternal AND t.tgfoid <> 'citus_truncate_trigger()'::regprocedure
             ORDER BY t.tgname
        LOOP
            IF strpos(v_trigger.def, ' ON ' || v_rel::text || ' ') = 0 THEN
                RAISE EXCEPTION 'Citus: cannot move trigger % of % to its placement: %', v_trigger.tgname, v_rel, v_trigger.def;
            END IF;
            EXECUTE overlay(v_trigger.def PLACING ' ON ' || v_placement::text || ' '
                            FROM strpos(v_trigger.def, ' ON ' || v_rel::text || ' ')
                            FOR length(' ON ' || v_rel::text || ' '));
            EXECUTE format('DROP TRIGGER %I ON %s', v_trigger.tgname, v_rel);
        END LOOP;
    END LOOP;
END
$citus$;
SET LOCAL citus.enable_ddl_propagation = on;
