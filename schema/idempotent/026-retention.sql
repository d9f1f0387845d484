-- 026-retention: retention as data (_measure.retention, schema/100-interval-runs.sql), run by
-- the platform itself on every engine (the collector's upkeep calls _measure.retention_run
-- daily; `measuredb retention run`, POST /admin/retention/run), never by a TimescaleDB job.
--
--   raw    whole days of interval runs (plain: daily partitions, TimescaleDB: one-day chunks)
--          whose end is before now - keep, oldest first, and the extra copies before them.
--          A day holding an hour still waiting in _measure.tier_dirty (not condensed into
--          every tier it feeds: hour, record, DISCOPEN, terminal, shift, month, year tiers)
--          is held back with every later day, and the purge says which hours held it.
--   hour   rows per UTC hour before now - keep (hour tiers, record/DISCOPEN/terminal hours,
--          response histograms, breaches, threshold lines, shadows)
--   day    shift tiers and per-day rows
--   month  month and year tiers, per-month rows, the CPU trend line
-- Tier classes are held back the same way, at the first hour still dirty. Each class's
-- horizon (_measure.purged) only moves forward; nothing is recomputed before it from the
-- class below (_measure.fresh_hours, _measure.condense_upper).

-- The policy and where each class stands.
CREATE OR REPLACE FUNCTION _measure.retention_show(p_now timestamptz DEFAULT now())
RETURNS TABLE (class text, keep interval, cutoff timestamptz, purged_before timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT r.class, r.keep, p_now - r.keep, p.purged_before
      FROM _measure.retention r LEFT JOIN _measure.purged p USING (class)
     ORDER BY r.ord
$$;
GRANT EXECUTE ON FUNCTION _measure.retention_show(timestamptz) TO measure_writer;

-- Change how long a class is kept (NULL: for ever). Each class is kept at least as long as
-- the one below it, and day and month data at least a month and a year longer than the
-- class below (so a recomputed shift or month never straddles a horizon).
CREATE OR REPLACE FUNCTION _measure.retention_set(p_class text, p_keep interval)
RETURNS TABLE (class text, keep interval)
LANGUAGE plpgsql AS $$
DECLARE
    v_prev record;
    v_next record;
    v_ord smallint;
    v_margin constant interval[] := ARRAY[INTERVAL '0', INTERVAL '0', INTERVAL '31 days', INTERVAL '366 days'];
BEGIN
    SELECT r.ord INTO v_ord FROM _measure.retention r WHERE r.class = p_class;
    IF v_ord IS NULL THEN
        RAISE EXCEPTION 'unknown retention class %', coalesce(quote_literal(p_class), 'NULL')
            USING ERRCODE = '22023', COLUMN = 'class', HINT = 'classes: raw, hour, day, month';
    END IF;
    IF p_keep IS NOT NULL AND p_keep < INTERVAL '1 day' THEN
        RAISE EXCEPTION 'keep % is too short: keep % data at least 1 day', p_keep, p_class
            USING ERRCODE = '22023', COLUMN = 'keep';
    END IF;
    IF p_keep IS NULL AND p_class = 'raw' THEN
        RAISE EXCEPTION 'raw data cannot be kept for ever here: give a duration (default 35 days)'
            USING ERRCODE = '22023', COLUMN = 'keep';
    END IF;
    SELECT r.* INTO v_prev FROM _measure.retention r WHERE r.ord = v_ord - 1;
    SELECT r.* INTO v_next FROM _measure.retention r WHERE r.ord = v_ord + 1;
    IF v_prev.class IS NOT NULL AND p_keep IS NOT NULL
       AND (v_prev.keep IS NULL OR p_keep < v_prev.keep + v_margin[v_ord]) THEN
        RAISE EXCEPTION '% data must be kept % % data (kept %); asked for %', p_class,
            CASE WHEN v_margin[v_ord] = INTERVAL '0' THEN 'at least as long as'
                 ELSE format('at least %s longer than', v_margin[v_ord]) END,
            v_prev.class, coalesce(v_prev.keep::text, 'for ever'), p_keep
            USING ERRCODE = '22023', COLUMN = 'keep';
    END IF;
    IF v_next.class IS NOT NULL AND v_next.keep IS NOT NULL
       AND (p_keep IS NULL OR v_next.keep < p_keep + v_margin[v_ord + 1]) THEN
        RAISE EXCEPTION '% data must be kept % % data; % data is kept %: change it first (measuredb retention set % …)',
            v_next.class,
            CASE WHEN v_margin[v_ord + 1] = INTERVAL '0' THEN 'at least as long as'
                 ELSE format('at least %s longer than', v_margin[v_ord + 1]) END,
            p_class, v_next.class, v_next.keep, v_next.class
            USING ERRCODE = '22023', COLUMN = 'keep';
    END IF;
    UPDATE _measure.retention r SET keep = p_keep, updated_at = now() WHERE r.class = p_class;
    RETURN QUERY SELECT r.class, r.keep FROM _measure.retention r ORDER BY r.ord;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.retention_set(text, interval) TO measure_writer;

-- The tier tables of a class: (table, time column, the value of that column a row older than
-- the cut-off has: 'ts' = timestamptz < cutoff, 'local_date' = date < the cut-off's local
-- date of the row's system, 'local_year' likewise for a year, and an optional grain filter).
CREATE OR REPLACE VIEW _measure.retention_table (class, tbl, col, cmp, filter) AS VALUES
    ('hour', 'cpu_hour', 'hour_at', 'ts', NULL),
    ('hour', 'disc_hour', 'hour_at', 'ts', NULL),
    ('hour', 'line_hour', 'hour_at', 'ts', NULL),
    ('hour', 'process_hour', 'hour_at', 'ts', NULL),
    ('hour', 'userdef_hour', 'hour_at', 'ts', NULL),
    ('hour', 'tmf_hour', 'hour_at', 'ts', NULL),
    ('hour', 'hour_shadow', 'hour_at', 'ts', NULL),
    ('hour', 'hour_breach', 'hour_at', 'ts', NULL),
    ('hour', 'threshold_line', 'hour_at', 'ts', NULL),
    ('hour', 'terminal_hour', 'hour_at', 'ts', NULL),
    ('hour', 'hour_baseline', 'hour_at', 'ts', NULL),  -- 060-analysis.sql
    ('hour', 'record_tier', 'bucket_at', 'ts', 'grain = ''h'''),
    ('hour', 'response_hist', 'bucket_at', 'ts', 'grain = ''h'''),
    ('hour', 'discopen_file_tier', 'bucket_at', 'ts', 'grain = ''h'''),
    ('day', 'tier_shift', 'shift_day', 'local_date', NULL),
    ('day', 'record_tier', 'bucket_at', 'ts', 'grain = ''d'''),
    ('day', 'response_hist', 'bucket_at', 'ts', 'grain = ''d'''),
    ('day', 'discopen_file_tier', 'bucket_at', 'ts', 'grain = ''d'''),
    ('day', 'terminal_rollup', 'start_at', 'ts', 'grain = ''shift'''),
    ('day', 'threshold_rollup', 'start_at', 'ts', 'grain = ''shift'''),
    ('month', 'tier_month', 'month', 'local_month', NULL),
    ('month', 'tier_year', 'year', 'local_year', NULL),
    ('month', 'record_tier', 'bucket_at', 'ts_month', 'grain = ''m'''),
    ('month', 'response_hist', 'bucket_at', 'ts_month', 'grain = ''m'''),
    ('month', 'discopen_file_tier', 'bucket_at', 'ts_month', 'grain = ''m'''),
    ('month', 'discopen_open_hours', 'month_at', 'ts_month', NULL),
    ('month', 'terminal_rollup', 'start_at', 'ts_month', 'grain = ''month'''),
    ('month', 'threshold_rollup', 'start_at', 'ts_month', 'grain = ''month'''),
    ('month', 'cpu_trend_day', 'day', 'local_date', NULL);
GRANT SELECT ON _measure.retention_table TO measure_writer;

-- The WHERE clause selecting the rows of one retention table older than $1 (a cut-off).
CREATE OR REPLACE FUNCTION _measure.retention_where(p_col text, p_cmp text, p_filter text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE p_cmp
        WHEN 'ts' THEN format('%I < $1', p_col)
        WHEN 'ts_month' THEN format('%I < date_trunc(''month'', $1, ''UTC'')', p_col)
        WHEN 'local_date' THEN format('%I < ($1 AT TIME ZONE (SELECT s.time_zone FROM _measure.system s '
                                      'WHERE s.system_id = t.system_id))::date', p_col)
        WHEN 'local_month' THEN format('%I < date_trunc(''month'', $1 AT TIME ZONE (SELECT s.time_zone '
                                       'FROM _measure.system s WHERE s.system_id = t.system_id))::date', p_col)
        WHEN 'local_year' THEN format('%I < extract(year FROM $1 AT TIME ZONE (SELECT s.time_zone '
                                      'FROM _measure.system s WHERE s.system_id = t.system_id))', p_col)
    END || coalesce(' AND ' || p_filter, '')
$$;

-- Apply (or, p_dry_run, only report) the retention policy as of p_now. Returns the purge_log
-- row as JSON: {purge_id, dry_run, removed: [{class, cutoff, object, rows, intervals,
-- counter_values}], held_back: [{class, cutoff, reason, first_hour, hours}], horizons}.
CREATE OR REPLACE FUNCTION _measure.retention_run(p_dry_run boolean DEFAULT false,
                                                  p_now timestamptz DEFAULT now(),
                                                  p_by text DEFAULT 'sql')
RETURNS jsonb LANGUAGE plpgsql SET work_mem = '64MB' AS $$
DECLARE
    v_id bigint;
    v_removed jsonb := '[]';
    v_held jsonb := '[]';
    v_keep interval;
    v_cut timestamptz;
    v_eff timestamptz;
    v_dirty timestamptz;
    v_part record;
    v_t record;
    v_n bigint;
    v_iv bigint;
    v_vals bigint;
    v_last timestamptz;
    v_class text;
BEGIN
    -- one retention run at a time (a second one waits, then finds less to do)
    PERFORM pg_advisory_xact_lock(0x4D454153, 200);
    INSERT INTO _measure.purge_log (dry_run, requested_by, now_at) VALUES (p_dry_run, p_by, p_now)
    RETURNING purge_id INTO v_id;

    -- raw: whole days, oldest first, up to the first one holding a dirty hour
    SELECT r.keep INTO v_keep FROM _measure.retention r WHERE r.class = 'raw';
    v_cut := p_now - v_keep;
    FOR v_part IN SELECT * FROM _measure.run_parts() p WHERE p.hi <= v_cut ORDER BY p.lo LOOP
        SELECT min(d.hour_at) INTO v_dirty FROM _measure.tier_dirty d WHERE d.hour_at < v_part.hi;
        IF v_dirty IS NOT NULL THEN
            v_held := v_held || jsonb_build_object(
                'class', 'raw', 'cutoff', v_cut, 'object', v_part.part::text, 'first_hour', v_dirty,
                'reason', 'hours not condensed into every tier yet (run _measure.condense())',
                'hours', (SELECT jsonb_agg(x ORDER BY x) FROM (
                              SELECT DISTINCT d.hour_at AS x FROM _measure.tier_dirty d
                               WHERE d.hour_at < v_part.hi ORDER BY 1 LIMIT 48) y));
            EXIT;
        END IF;
        EXECUTE format('SELECT count(*), coalesce(sum(r.n), 0), coalesce(sum(r.n * k.k), 0) FROM %s r '
                       'JOIN (SELECT type_code, count(*) AS k FROM _measure.counter_role GROUP BY 1) k USING (type_code)',
                       v_part.part)
        INTO v_n, v_iv, v_vals;
        v_removed := v_removed || jsonb_build_object(
            'class', 'raw', 'cutoff', v_cut, 'object', v_part.part::text, 'from', v_part.lo, 'to', v_part.hi,
            'rows', v_n, 'intervals', v_iv, 'counter_values', v_vals, 'compressed', v_part.compressed);
        IF NOT p_dry_run THEN
            IF (SELECT c.relkind FROM pg_class c WHERE c.oid = '_measure.interval_run'::regclass) = 'p' THEN
                EXECUTE format('DROP TABLE %s', v_part.part);
            ELSE
                PERFORM drop_chunks('_measure.interval_run', older_than => v_part.hi);
            END IF;
        END IF;
        v_last := v_part.hi;
    END LOOP;
    IF v_last IS NOT NULL THEN
        SELECT count(*) INTO v_n FROM _measure.extra_copy x WHERE x.copy_at < v_last;
        v_removed := v_removed || jsonb_build_object('class', 'raw', 'cutoff', v_cut,
                                                     'object', '_measure.extra_copy', 'rows', v_n);
        IF NOT p_dry_run THEN
            DELETE FROM _measure.extra_copy x WHERE x.copy_at < v_last;
            INSERT INTO _measure.purged AS p (class, purged_before) VALUES ('raw', v_last)
            ON CONFLICT (class) DO UPDATE SET purged_before = greatest(p.purged_before, EXCLUDED.purged_before);
        END IF;
    END IF;

    -- tier classes: rows before the cut-off, never at or after the first dirty hour
    FOR v_class, v_keep IN SELECT r.class, r.keep FROM _measure.retention r WHERE r.class <> 'raw'
                                                                            AND r.keep IS NOT NULL ORDER BY r.ord LOOP
        v_cut := p_now - v_keep;
        SELECT min(d.hour_at) INTO v_dirty
          FROM (SELECT hour_at FROM _measure.tier_dirty UNION ALL SELECT hour_at FROM _measure.month_dirty) d
         WHERE d.hour_at < v_cut;
        v_eff := v_cut;
        IF v_dirty IS NOT NULL THEN
            v_eff := v_dirty;
            v_held := v_held || jsonb_build_object(
                'class', v_class, 'cutoff', v_cut, 'first_hour', v_dirty,
                'reason', 'hours not condensed into every tier yet (run _measure.condense())',
                'hours', (SELECT jsonb_agg(x ORDER BY x) FROM (
                              SELECT DISTINCT d.hour_at AS x
                                FROM (SELECT hour_at FROM _measure.tier_dirty
                                      UNION ALL SELECT hour_at FROM _measure.month_dirty) d
                               WHERE d.hour_at < v_cut ORDER BY 1 LIMIT 48) y));
        END IF;
        CONTINUE WHEN v_eff <= _measure.horizon(v_class);
        FOR v_t IN SELECT * FROM _measure.retention_table r WHERE r.class = v_class LOOP
            IF p_dry_run THEN
                EXECUTE format('SELECT count(*) FROM _measure.%I t WHERE %s', v_t.tbl,
                               _measure.retention_where(v_t.col, v_t.cmp, v_t.filter))
                INTO v_n USING v_eff;
            ELSE
                EXECUTE format('DELETE FROM _measure.%I t WHERE %s', v_t.tbl,
                               _measure.retention_where(v_t.col, v_t.cmp, v_t.filter))
                USING v_eff;
                GET DIAGNOSTICS v_n = ROW_COUNT;
            END IF;
            CONTINUE WHEN v_n = 0;
            v_removed := v_removed || jsonb_build_object('class', v_class, 'cutoff', v_eff,
                                                         'object', '_measure.' || v_t.tbl
                                                                   || coalesce(' (' || v_t.filter || ')', ''),
                                                         'rows', v_n);
        END LOOP;
        IF NOT p_dry_run THEN
            INSERT INTO _measure.purged AS p (class, purged_before) VALUES (v_class, v_eff)
            ON CONFLICT (class) DO UPDATE SET purged_before = greatest(p.purged_before, EXCLUDED.purged_before);
        END IF;
    END LOOP;

    UPDATE _measure.purge_log SET finished_at = clock_timestamp(), removed = v_removed, held_back = v_held
     WHERE purge_id = v_id;
    RETURN jsonb_build_object('purge_id', v_id, 'dry_run', p_dry_run, 'now', p_now, 'removed', v_removed,
                              'held_back', v_held,
                              'horizons', (SELECT jsonb_object_agg(p.class, p.purged_before) FROM _measure.purged p));
END
$$;
GRANT EXECUTE ON FUNCTION _measure.retention_run(boolean, timestamptz, text) TO measure_writer;

-- ---------------------------------------------------------------- upkeep

-- The platform's upkeep, run by the collector every few minutes (and at the end of a
-- backfill), in the caller's transaction; returns what it did:
--   packed      runs merged in hours that live collection wrote a minute at a time
--   months      hours whose month-level rows live collection left (_measure.month_dirty)
--   compressed  TimescaleDB chunks whose day ended more than p_compress_after ago (none on
--               plain PostgreSQL, where TOAST compresses every run as it is written)
--   retention   the result of _measure.retention_run when the last one (not a dry run) is a
--               day old or more
CREATE OR REPLACE FUNCTION _measure.upkeep(p_now timestamptz DEFAULT now(),
                                           p_compress_after interval DEFAULT INTERVAL '1 day',
                                           p_by text DEFAULT 'upkeep')
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_packed integer;
    v_months integer;
    v_part record;
    v_compressed text[] := '{}';
    v_retention jsonb;
BEGIN
    v_packed := _measure.pack_runs(p_now, 10000);
    v_months := _measure.condense_pending_months();
    IF p_compress_after IS NOT NULL THEN
        FOR v_part IN SELECT * FROM _measure.run_parts() p
                       WHERE NOT p.compressed AND p.hi <= p_now - p_compress_after
                         AND (SELECT c.relkind FROM pg_class c WHERE c.oid = '_measure.interval_run'::regclass) <> 'p'
                         AND NOT EXISTS (SELECT 1 FROM _measure.pack_todo t WHERE t.hour_at >= p.lo AND t.hour_at < p.hi)
                       ORDER BY p.lo LOOP
            PERFORM compress_chunk(v_part.part, if_not_compressed => true);
            v_compressed := v_compressed || v_part.part::text;
        END LOOP;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM _measure.purge_log l
                    WHERE NOT l.dry_run AND l.finished_at IS NOT NULL AND l.now_at > p_now - INTERVAL '1 day') THEN
        v_retention := _measure.retention_run(false, p_now, p_by);
    END IF;
    RETURN jsonb_build_object('packed', v_packed, 'months', v_months, 'compressed', to_jsonb(v_compressed),
                              'retention', v_retention);
END
$$;
GRANT EXECUTE ON FUNCTION _measure.upkeep(timestamptz, interval, text) TO measure_writer;

-- ---------------------------------------------------------------- for the API's admin scope

-- The API (role measure_api) changes retention only through these; the admin scope of its
-- tokens is checked by the API (api/auth.py). The command line calls the same functions
-- (core/retention.py), as the collector's role where it runs under it.
CREATE OR REPLACE FUNCTION measure.retention_show()
RETURNS TABLE (class text, keep interval, cutoff timestamptz, purged_before timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM _measure.retention_show()
$$;
REVOKE ALL ON FUNCTION measure.retention_show() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.retention_show() TO measure_api, measure_writer;

CREATE OR REPLACE FUNCTION measure.retention_set(p_class text, p_keep interval)
RETURNS TABLE (class text, keep interval)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM _measure.retention_set(p_class, p_keep)
$$;
REVOKE ALL ON FUNCTION measure.retention_set(text, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.retention_set(text, interval) TO measure_api, measure_writer;

CREATE OR REPLACE FUNCTION measure.retention_run(p_dry_run boolean, p_by text)
RETURNS jsonb LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT _measure.retention_run(p_dry_run, now(), p_by)
$$;
REVOKE ALL ON FUNCTION measure.retention_run(boolean, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.retention_run(boolean, text) TO measure_api, measure_writer;

CREATE OR REPLACE FUNCTION measure.purge_log(p_limit integer DEFAULT 20)
RETURNS TABLE (purge_id bigint, started_at timestamptz, finished_at timestamptz, dry_run boolean,
               requested_by text, now_at timestamptz, removed jsonb, held_back jsonb)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT l.purge_id, l.started_at, l.finished_at, l.dry_run, l.requested_by, l.now_at, l.removed, l.held_back
      FROM _measure.purge_log l ORDER BY l.purge_id DESC LIMIT greatest(1, least(p_limit, 1000))
$$;
REVOKE ALL ON FUNCTION measure.purge_log(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.purge_log(integer) TO measure_api, measure_writer;
