-- 021-condense, TimescaleDB: the hour tiers are continuous aggregates (010-tiers.timescale.sql)
-- without refresh policies; the tiers job below is their only refresher.
--
-- refresh_continuous_aggregate runs several transactions of its own, so it cannot run in
-- this file (the schema runner's single transaction), in a function, in a block with an
-- EXCEPTION clause, in dynamic SQL (EXECUTE), nor inside a FOR loop over a query ("cannot
-- commit while a portal is pinned", timescaledb#3179). It can run in a procedure called
-- in a non-atomic context, which is how TimescaleDB's job scheduler calls a job. So the
-- tiers job is a PROCEDURE that reads its work into arrays first, refreshes with static
-- CALLs in integer/array loops, and COMMITs after every refresh (as the TimescaleDB docs'
-- incremental refresh example does).
--
-- _measure.condense keeps the plain branch's signature for the collector and returns 0;
-- the tiers job does the work within its schedule (5 minutes).

CREATE OR REPLACE FUNCTION _measure.condense(p_system smallint DEFAULT NULL,
                                             p_limit integer DEFAULT 2000)
RETURNS integer LANGUAGE sql AS $$
    SELECT 0  -- the tiers job does the work (see above)
$$;
GRANT EXECUTE ON FUNCTION _measure.condense(smallint, integer) TO measure_writer;

-- The tiers job (config: {"max_hours": N}, default 2000 dirty hours per run, oldest first).
--  0. reads the oldest dirty hours with the time each was noted (its work, fixed now);
--  1. refreshes every hour aggregate over the runs of consecutive dirty hours (only those
--     hours, and none before _measure.raw_horizon(): a refresh re-materializes what changed
--     inside its window, and a window that reached over raw chunks dropped by retention
--     would delete their tier rows);
--  2. recomputes the shifts, months and years containing the dirty hours, per system, and
--     clears exactly the dirty rows it read (a row noted again meanwhile has a newer
--     noted_at, stays dirty, and is done again by the next run).
CREATE OR REPLACE PROCEDURE _measure.tiers_job(job_id integer, config jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    v_max integer := coalesce((config->>'max_hours')::integer, 2000);
    v_sys smallint[];
    v_hour timestamptz[];
    v_noted timestamptz[];
    v_from timestamptz[];
    v_to timestamptz[];
    v_systems smallint[];
    v_hours timestamptz[];
    v_s smallint;
    i integer;
BEGIN
    SELECT array_agg(d.system_id ORDER BY d.hour_at, d.system_id),
           array_agg(d.hour_at ORDER BY d.hour_at, d.system_id),
           array_agg(d.noted_at ORDER BY d.hour_at, d.system_id)
      INTO v_sys, v_hour, v_noted
      FROM (SELECT system_id, hour_at, noted_at FROM _measure.tier_dirty
             ORDER BY hour_at, system_id LIMIT greatest(v_max, 1)) d;
    IF v_hour IS NULL THEN
        RETURN;
    END IF;
    -- runs of consecutive hours (gaps and islands): one refresh window per run
    SELECT array_agg(r.lo ORDER BY r.lo), array_agg(r.hi ORDER BY r.lo) INTO v_from, v_to
      FROM (SELECT min(g.h) AS lo, max(g.h) + INTERVAL '1 hour' AS hi
              FROM (SELECT u.h, u.h - (row_number() OVER (ORDER BY u.h)) * INTERVAL '1 hour' AS island
                      FROM (SELECT DISTINCT x AS h FROM unnest(v_hour) x
                     WHERE x >= _measure.raw_horizon()) u) g
             GROUP BY g.island) r;
    v_systems := ARRAY(SELECT DISTINCT x FROM unnest(v_sys) x ORDER BY 1);
    COMMIT;

    FOR i IN 1 .. coalesce(cardinality(v_from), 0) LOOP
        CALL refresh_continuous_aggregate('_measure.cpu_hour', v_from[i], v_to[i]);
        COMMIT;
        CALL refresh_continuous_aggregate('_measure.disc_hour', v_from[i], v_to[i]);
        COMMIT;
        CALL refresh_continuous_aggregate('_measure.line_hour', v_from[i], v_to[i]);
        COMMIT;
        CALL refresh_continuous_aggregate('_measure.process_hour', v_from[i], v_to[i]);
        COMMIT;
        CALL refresh_continuous_aggregate('_measure.userdef_hour', v_from[i], v_to[i]);
        COMMIT;
        CALL refresh_continuous_aggregate('_measure.tmf_hour', v_from[i], v_to[i]);
        COMMIT;
    END LOOP;

    FOREACH v_s IN ARRAY v_systems LOOP
        v_hours := ARRAY(SELECT v_hour[k] FROM generate_subscripts(v_hour, 1) k
                          WHERE v_sys[k] = v_s ORDER BY 1);
        PERFORM _measure.condense_upper(v_s, v_hours);
        DELETE FROM _measure.tier_dirty d
         USING unnest(v_sys, v_hour, v_noted) AS w (system_id, hour_at, noted_at)
         WHERE w.system_id = v_s AND d.system_id = w.system_id
           AND d.hour_at = w.hour_at AND d.noted_at = w.noted_at;
        COMMIT;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION _measure.recondense(p_system smallint, p_from timestamptz, p_to timestamptz)
RETURNS integer LANGUAGE sql AS $$
    SELECT _measure.note_intervals(p_system, p_from, p_to)  -- the tiers job picks them up
$$;
GRANT EXECUTE ON FUNCTION _measure.recondense(smallint, timestamptz, timestamptz) TO measure_writer;

-- Retention: drop whole chunks (one UTC day each) of raw data older than p_older_than, only
-- when all their tiers are computed (_measure.purge_blocker, shared with the plain branch).
-- Returns the rows dropped, like the plain branch; a chunk is dropped only when all of it
-- is older than the cut-off, so up to a day more than in the plain branch is kept.
-- The tier rows of the dropped days stay: nothing refreshes a window over them (the tiers
-- job refreshes only noted hours, and purge refuses while older hours are still noted).
CREATE OR REPLACE FUNCTION _measure.purge(p_older_than interval, p_now timestamptz DEFAULT now())
RETURNS TABLE (counter_copies bigint, interval_records bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_cutoff timestamptz := p_now - p_older_than;
    v_why text;
    v_chunk regclass;
    v_n bigint;
BEGIN
    IF p_older_than < INTERVAL '1 day' THEN
        RAISE EXCEPTION 'purge: keep at least one day of raw data (asked for %)', p_older_than;
    END IF;
    v_why := _measure.purge_blocker(v_cutoff);
    IF v_why IS NOT NULL THEN
        RAISE EXCEPTION 'purge refused: %', v_why USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    counter_copies := 0;
    interval_records := 0;
    FOR v_chunk IN SELECT c FROM show_chunks('_measure.counter_copy', older_than => v_cutoff) c LOOP
        EXECUTE format('SELECT count(*) FROM %s', v_chunk) INTO v_n;
        counter_copies := counter_copies + v_n;
    END LOOP;
    FOR v_chunk IN SELECT c FROM show_chunks('_measure.interval_record', older_than => v_cutoff) c LOOP
        EXECUTE format('SELECT count(*) FROM %s', v_chunk) INTO v_n;
        interval_records := interval_records + v_n;
    END LOOP;
    PERFORM drop_chunks('_measure.counter_copy', older_than => v_cutoff);
    PERFORM drop_chunks('_measure.interval_record', older_than => v_cutoff);
    INSERT INTO _measure.raw_horizon AS h (purged_before) VALUES (v_cutoff)
    ON CONFLICT (only_row) DO UPDATE SET purged_before = greatest(h.purged_before, EXCLUDED.purged_before);
    RETURN NEXT;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.purge(interval, timestamptz) TO measure_writer;

-- Change the age with alter_job(job_id, config => '{"older_than": "90 days"}').
CREATE OR REPLACE PROCEDURE _measure.purge_job(job_id integer, config jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM _measure.purge(coalesce((config->>'older_than')::interval, INTERVAL '35 days'));
END
$$;

-- The jobs, registered once (add_job has no if_not_exists: look them up first). This file
-- runs on every start; a job deleted by hand comes back, so pause one instead with
-- alter_job(job_id, scheduled => false).
SELECT add_job('_measure.tiers_job', INTERVAL '5 minutes', config => '{"max_hours": 2000}'::jsonb)
 WHERE NOT EXISTS (SELECT 1 FROM timescaledb_information.jobs j
                    WHERE j.proc_schema = '_measure' AND j.proc_name = 'tiers_job');
SELECT add_job('_measure.purge_job', INTERVAL '1 day', config => '{"older_than": "35 days"}'::jsonb)
 WHERE NOT EXISTS (SELECT 1 FROM timescaledb_information.jobs j
                    WHERE j.proc_schema = '_measure' AND j.proc_name = 'purge_job');
