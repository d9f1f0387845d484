-- 005-distribute (Citus only): the distributed layout. Applied on every run of a database
-- with the citus extension, after the versioned files (the plain branch) and before the other
-- idempotent files, so the functions and views are created over distributed tables.
--
-- * Interval data and every tier are distributed by system_id, all in one co-location group
--   (the group of _measure.interval_run): every row of one system, raw or condensed, lives in
--   one shard group on one worker, so a report, panel, API read or condensing of one system
--   runs on that worker, and cross-system reads run on all workers in parallel.
-- * The catalogue and the configuration (systems, entity types, counters, measurements,
--   entities, shifts, calendars, holidays, thresholds, retention …) are reference tables: a
--   copy on every node, so a shard joins them locally.
-- * The collector's and the API's own bookkeeping (checkpoints, heartbeats, requests to the
--   collector, tokens, report runs, the purge log, the hours to pack, the schema version) stays
--   on the coordinator as plain tables. A plain table may not reference a reference table (as
--   a "Citus local table" it could, but Citus then refuses the collector's upserts with now():
--   "functions used in the DO UPDATE SET clause ... must be marked IMMUTABLE"), so their
--   foreign keys to _measure.system and _measure.report_definition become triggers that keep
--   the same integrity (below): a row naming no system or definition is refused (23503, as by
--   the foreign key), a system or definition still named is not deleted, and a definition's or
--   system's report runs go with it (ON DELETE CASCADE).
--
-- Citus's rule that a unique constraint of a distributed table includes the distribution
-- column: the primary keys of _measure.interval_run and _measure.extra_copy get system_id as
-- their last column (a measurement belongs to one system, so the same rows are unique; the
-- leading columns, and so MEASREAD's index scans, stay the same). Every other distributed
-- table has system_id in its key already.
--
-- Idempotent: a table already distributed is left as it is. A table of _measure in none of
-- the lists below stops the run (a new versioned table must be placed here first).

-- The foreign keys of the coordinator's own tables to reference tables, kept by triggers (a
-- single column each; on_delete as pg_constraint.confdeltype: 'a' no action, 'c' cascade; on
-- update: no action).
CREATE TEMP TABLE _citus_foreign_key ON COMMIT DROP AS
SELECT * FROM (VALUES
    ('collector_state_system_id_fkey', 'collector_state', 'system_id', 'system', 'system_id', 'a'::"char"),
    ('collector_heartbeat_system_id_fkey', 'collector_heartbeat', 'system_id', 'system', 'system_id', 'a'),
    ('control_request_system_id_fkey', 'control_request', 'system_id', 'system', 'system_id', 'a'),
    ('report_run_definition_id_fkey', 'report_run', 'definition_id', 'report_definition', 'definition_id', 'c'),
    ('report_run_system_id_fkey', 'report_run', 'system_id', 'system', 'system_id', 'c')
) f (conname, child, child_column, parent, parent_column, on_delete);

DO $citus$
DECLARE
    -- distributed by system_id, co-located with the first
    v_distributed text[] := ARRAY[
        'interval_run', 'extra_copy',
        'cpu_hour', 'disc_hour', 'line_hour', 'process_hour', 'userdef_hour', 'tmf_hour',
        'tier_shift', 'tier_month', 'tier_year', 'tier_dirty', 'month_dirty',
        'record_tier', 'discopen_file_tier', 'discopen_open_hours', 'response_hist',
        'terminal_hour', 'terminal_rollup', 'threshold_line', 'threshold_rollup',
        'hour_breach', 'hour_shadow', 'cpu_trend_day', 'shard_route', 'hour_baseline'];
    -- on every node, in foreign-key order (a referenced table first)
    v_reference text[] := ARRAY[
        'system', 'entity_type', 'counter_def', 'tier_entity', 'tier_item', 'measurement', 'entity',
        'shift', 'calendar', 'calendar_shift', 'holiday', 'threshold', 'system_cpu_type',
        'retention', 'purged', 'record_tier_type', 'record_tier_counter',
        'breach_basis', 'breach_state', 'component_map', 'report_definition', 'structured_record',
        'install_info', 'analysis_setting', 'baseline_item', 'health_indicator'];
    -- on the coordinator only
    v_local text[] := ARRAY[
        'schema_version', 'api_token', 'purge_log', 'collector_state', 'collector_heartbeat',
        'control_request', 'report_run', 'pack_todo', 'threshold_rebuild_pending', 'analysis_method'];
    v_name text;
    v_rel regclass;
    v_unplaced text;
    v_seq regclass;
    v_max bigint;
BEGIN
    SELECT string_agg(c.relname, ', ' ORDER BY c.relname) INTO v_unplaced
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = '_measure' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
       AND c.relname <> ALL (v_distributed || v_reference || v_local);
    IF v_unplaced IS NOT NULL THEN
        RAISE EXCEPTION 'Citus: tables of _measure with no place in the distributed layout: %', v_unplaced
            USING HINT = 'add them to schema/idempotent/005-distribute.citus.sql';
    END IF;

    -- the distribution column in every unique key
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '_measure.interval_run'::regclass) THEN
        ALTER TABLE _measure.interval_run DROP CONSTRAINT interval_run_pkey;
        ALTER TABLE _measure.interval_run
            ADD PRIMARY KEY (measurement_id, entity_id, record_at, from_at, system_id);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '_measure.extra_copy'::regclass) THEN
        ALTER TABLE _measure.extra_copy DROP CONSTRAINT extra_copy_pkey;
        ALTER TABLE _measure.extra_copy
            ADD PRIMARY KEY (measurement_id, entity_id, record_at, copy_at, copy_kind, system_id);
    END IF;

    -- the coordinator's own tables stay plain PostgreSQL tables, which Citus leaves alone (a
    -- Citus local table would refuse their upserts' now()): without their foreign keys to the
    -- reference tables, which a plain local table may not have; each becomes the triggers made
    -- below, so only the foreign keys listed there may be dropped
    FOREACH v_name IN ARRAY v_local LOOP
        v_rel := format('_measure.%I', v_name)::regclass;
        FOR v_unplaced IN SELECT k.conname FROM pg_constraint k WHERE k.conrelid = v_rel AND k.contype = 'f' LOOP
            IF NOT EXISTS (
                SELECT 1 FROM pg_constraint k JOIN _citus_foreign_key f ON f.conname = k.conname
                 WHERE k.conrelid = v_rel AND k.conname = v_unplaced AND f.child = v_name
                   AND k.confrelid = format('_measure.%I', f.parent)::regclass
                   AND k.conkey = ARRAY[(SELECT attnum FROM pg_attribute WHERE attrelid = k.conrelid AND attname = f.child_column)]
                   AND k.confkey = ARRAY[(SELECT attnum FROM pg_attribute WHERE attrelid = k.confrelid AND attname = f.parent_column)]
                   AND k.confdeltype = f.on_delete AND k.confupdtype = 'a' AND k.confmatchtype = 's') THEN
                RAISE EXCEPTION 'Citus: foreign key % of % is not among those kept by triggers', v_unplaced, v_rel
                    USING HINT = 'add it to _citus_foreign_key in schema/idempotent/005-distribute.citus.sql';
            END IF;
            EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', v_rel, v_unplaced);
        END LOOP;
    END LOOP;

    -- (a table referencing one of them was made a Citus local table by Citus itself when the
    -- referenced table became a reference table: it becomes a reference table in its turn.
    -- pg_dist_partition, not citus_tables: that one measures every shard from other
    -- connections, which wait for the locks this transaction holds once a versioned file has
    -- altered a reference table, as 140-tier-catalogue.sql does)
    FOREACH v_name IN ARRAY v_reference LOOP
        v_rel := format('_measure.%I', v_name)::regclass;
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition p
                        WHERE p.logicalrelid = v_rel AND p.partmethod = 'n' AND p.repmodel = 't') THEN
            PERFORM create_reference_table(v_rel);
        END IF;
    END LOOP;

    FOREACH v_name IN ARRAY v_distributed LOOP
        v_rel := format('_measure.%I', v_name)::regclass;
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = v_rel) THEN
            IF v_name = 'interval_run' THEN
                PERFORM create_distributed_table(v_rel, 'system_id', colocate_with => 'none');
            ELSE
                PERFORM create_distributed_table(v_rel, 'system_id', colocate_with => '_measure.interval_run');
            END IF;
        END IF;
    END LOOP;

    -- Citus restarts the identity sequence of a table it turns into a reference table (the
    -- coordinator keeps generating the ids, from 1 again): on past the ids the rows hold
    FOR v_rel, v_name, v_seq IN
        SELECT a.attrelid::regclass, a.attname, pg_get_serial_sequence(a.attrelid::regclass::text, a.attname)::regclass
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
         WHERE c.relnamespace = '_measure'::regnamespace AND c.relkind IN ('r', 'p') AND a.attidentity <> ''
    LOOP
        EXECUTE format('SELECT max(%I) FROM %s', v_name, v_rel) INTO v_max;
        IF v_max > coalesce(pg_sequence_last_value(v_seq), 0) THEN
            PERFORM setval(v_seq, v_max);
        END IF;
    END LOOP;

    -- citus_rebalance_start moves a shard while it is written by logical replication, which
    -- needs a replica identity: the whole row for the tables without a primary key
    FOR v_rel IN
        SELECT c.oid::regclass FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
         WHERE c.relnamespace = '_measure'::regnamespace AND NOT c.relispartition AND c.relreplident = 'd'
           AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)
    LOOP
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', v_rel);
    END LOOP;

END
$citus$;

-- The views, functions and triggers of the idempotent files that follow are created on the
-- coordinator only: Citus cannot propagate every statement they hold (a view's column
-- default, for one), and views and triggers are the coordinator's (a statement-level trigger
-- on a distributed table would fire on the workers). 900-citus.citus.sql then creates every
-- function, and every view over Citus tables, on the workers too, where the queries Citus
-- pushes down to the shards call them (and use the views' row types).
SET LOCAL citus.enable_ddl_propagation = off;

-- The foreign keys of the coordinator's own tables, as triggers. On the referencing table (a
-- plain table of the coordinator): a new or changed value must name a row of the referenced
-- table, which is locked against deletion (FOR KEY SHARE) as the foreign key would lock it. On
-- the referenced table (a reference table: its triggers run on its copy on the coordinator,
-- where 900-citus.citus.sql moves them, as every trigger of a reference table): a deleted or
-- re-keyed row still referenced is refused, or its referencing rows deleted (ON DELETE
-- CASCADE). Refusals raise foreign_key_violation (23503) with PostgreSQL's own messages.
-- TG_ARGV: the constraint, the referencing table and column, the referenced table and column,
-- the delete action.
CREATE OR REPLACE FUNCTION _measure.citus_fk_check() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_key text := to_jsonb(NEW) ->> TG_ARGV[2];
    v_type text;
    v_rows bigint;
BEGIN
    IF v_key IS NULL OR (TG_OP = 'UPDATE' AND v_key IS NOT DISTINCT FROM to_jsonb(OLD) ->> TG_ARGV[2]) THEN
        RETURN NULL;
    END IF;
    SELECT format_type(a.atttypid, a.atttypmod) INTO v_type FROM pg_attribute a
     WHERE a.attrelid = format('_measure.%I', TG_ARGV[3])::regclass AND a.attname = TG_ARGV[4];
    EXECUTE format('SELECT 1 FROM _measure.%I x WHERE x.%I = $1::%s FOR KEY SHARE OF x', TG_ARGV[3], TG_ARGV[4], v_type)
      USING v_key;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    IF v_rows = 0 THEN
        RAISE EXCEPTION 'insert or update on table "%" violates foreign key constraint "%"', TG_ARGV[1], TG_ARGV[0]
            USING ERRCODE = 'foreign_key_violation', SCHEMA = '_measure', TABLE = TG_ARGV[1], CONSTRAINT = TG_ARGV[0],
                  DETAIL = format('Key (%s)=(%s) is not present in table "%s".', TG_ARGV[2], v_key, TG_ARGV[3]);
    END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION _measure.citus_fk_referenced() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_key text := to_jsonb(OLD) ->> TG_ARGV[4];
    v_found boolean;
BEGIN
    IF v_key IS NULL OR (TG_OP = 'UPDATE' AND v_key IS NOT DISTINCT FROM to_jsonb(NEW) ->> TG_ARGV[4]) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' AND TG_ARGV[5] = 'c' THEN
        EXECUTE format('DELETE FROM _measure.%I x WHERE x.%I::text = $1', TG_ARGV[1], TG_ARGV[2]) USING v_key;
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM _measure.%I x WHERE x.%I::text = $1)', TG_ARGV[1], TG_ARGV[2])
       INTO v_found USING v_key;
    IF v_found THEN
        RAISE EXCEPTION 'update or delete on table "%" violates foreign key constraint "%" on table "%"',
                        TG_ARGV[3], TG_ARGV[0], TG_ARGV[1]
            USING ERRCODE = 'foreign_key_violation', SCHEMA = '_measure', TABLE = TG_ARGV[1], CONSTRAINT = TG_ARGV[0],
                  DETAIL = format('Key (%s)=(%s) is still referenced from table "%s".', TG_ARGV[4], v_key, TG_ARGV[1]);
    END IF;
    RETURN NULL;
END
$$;
DO $citus$
DECLARE
    f record;
    v_args text;
BEGIN
    FOR f IN SELECT * FROM _citus_foreign_key ORDER BY conname LOOP
        v_args := format('%L, %L, %L, %L, %L, %L', f.conname, f.child, f.child_column, f.parent, f.parent_column,
                         f.on_delete);
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON _measure.%I', f.conname, f.child);
        EXECUTE format('CREATE TRIGGER %I AFTER INSERT OR UPDATE OF %I ON _measure.%I FOR EACH ROW '
                       'EXECUTE FUNCTION _measure.citus_fk_check(%s)', f.conname, f.child_column, f.child, v_args);
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON _measure.%I', f.conname, f.parent);
        EXECUTE format('CREATE TRIGGER %I AFTER DELETE OR UPDATE OF %I ON _measure.%I FOR EACH ROW '
                       'EXECUTE FUNCTION _measure.citus_fk_referenced(%s)', f.conname, f.parent_column, f.parent, v_args);
    END LOOP;
END
$citus$;
