-- 021-condense, TimescaleDB: the hour tiers are continuous aggregates (010-tiers.timescale.sql).
-- A refresh cannot run inside a transaction block, so the tiers job (a procedure run by
-- TimescaleDB's scheduler, which may COMMIT) refreshes exactly the dirty days of every
-- hour aggregate, commits, and then recomputes the shifts, months and years containing
-- the dirty hours. _measure.condense keeps the plain branch's signature for the collector
-- and returns 0.

CREATE OR REPLACE FUNCTION _measure.condense(p_system smallint DEFAULT NULL,
                                             p_limit integer DEFAULT 2000)
RETURNS integer LANGUAGE sql AS $$
    SELECT 0  -- the tiers job does the work (see above)
$$;
GRANT EXECUTE ON FUNCTION _measure.condense(smallint, integer) TO measure_writer;

CREATE OR REPLACE PROCEDURE _measure.tiers_job(job_id integer, config jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    v_started timestamptz := clock_timestamp();
BEGIN
    -- 1. refresh the hour aggregates over whole UTC days that hold dirty hours
    FOR r IN SELECT DISTINCT date_bin(INTERVAL '1 day', hour_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS day_at
               FROM _measure.tier_dirty WHERE noted_at <= v_started ORDER BY 1 LOOP
        CALL refresh_continuous_aggregate('_measure.cpu_hour', r.day_at, r.day_at + INTERVAL '1 day');
        CALL refresh_continuous_aggregate('_measure.disc_hour', r.day_at, r.day_at + INTERVAL '1 day');
        CALL refresh_continuous_aggregate('_measure.line_hour', r.day_at, r.day_at + INTERVAL '1 day');
        CALL refresh_continuous_aggregate('_measure.process_hour', r.day_at, r.day_at + INTERVAL '1 day');
        CALL refresh_continuous_aggregate('_measure.userdef_hour', r.day_at, r.day_at + INTERVAL '1 day');
        CALL refresh_continuous_aggregate('_measure.tmf_hour', r.day_at, r.day_at + INTERVAL '1 day');
        COMMIT;
    END LOOP;
    -- 2. the upper tiers of exactly the dirty hours, one system at a time
    FOR r IN SELECT system_id, array_agg(hour_at ORDER BY hour_at) AS hours
               FROM _measure.tier_dirty WHERE noted_at <= v_started GROUP BY system_id LOOP
        PERFORM _measure.condense_upper(r.system_id, r.hours);
        DELETE FROM _measure.tier_dirty
         WHERE system_id = r.system_id AND hour_at = ANY (r.hours) AND noted_at <= v_started;
        COMMIT;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION _measure.recondense(p_system smallint, p_from timestamptz, p_to timestamptz)
RETURNS integer LANGUAGE sql AS $$
    SELECT _measure.note_intervals(p_system, p_from, p_to)  -- the tiers job picks them up
$$;
GRANT EXECUTE ON FUNCTION _measure.recondense(smallint, timestamptz, timestamptz) TO measure_writer;

-- Retention: drop whole chunks of raw data older than p_older_than, only when all their
-- tiers are computed. Never less than 8 days: the hour aggregates' refresh policy looks
-- back 7 days, and refreshing a window whose raw chunks are gone would empty its buckets.
CREATE OR REPLACE FUNCTION _measure.purge(p_older_than interval, p_now timestamptz DEFAULT now())
RETURNS TABLE (counter_copies bigint, interval_records bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_cutoff timestamptz := p_now - p_older_than;
    v_why text;
BEGIN
    IF p_older_than < INTERVAL '8 days' THEN
        RAISE EXCEPTION 'purge: with TimescaleDB keep at least 8 days of raw data (asked for %): '
                        'the hour aggregates refresh the last 7 days', p_older_than;
    END IF;
    v_why := _measure.purge_blocker(v_cutoff);
    IF v_why IS NOT NULL THEN
        RAISE EXCEPTION 'purge refused: %', v_why USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    SELECT count(*) INTO counter_copies FROM drop_chunks('_measure.counter_copy', older_than => v_cutoff);
    SELECT count(*) INTO interval_records FROM drop_chunks('_measure.interval_record', older_than => v_cutoff);
    RETURN NEXT;  -- counts are dropped chunks here, not rows
END
$$;
GRANT EXECUTE ON FUNCTION _measure.purge(interval, timestamptz) TO measure_writer;

CREATE OR REPLACE PROCEDURE _measure.purge_job(job_id integer, config jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM _measure.purge(coalesce((config->>'older_than')::interval, INTERVAL '35 days'));
END
$$;
