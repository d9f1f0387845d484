-- 100-interval-runs, TimescaleDB: the interval runs (see 100-interval-runs.sql) as a
-- hypertable of one-day chunks by FROM-TIMESTAMP, with native compression segmented by entity
-- (the runs of one counter record over a chunk compress together) and ordered by the rest of
-- the primary key, so a late run written into a compressed chunk has its key checked against
-- the batches of its entity only. Chunks are compressed by the platform's own upkeep
-- (_measure.upkeep, after MEASUREDB_COMPRESS_AFTER) and dropped by its retention, never by
-- TimescaleDB's job scheduler (its jobs failed on some PostgreSQL minor releases, and a read
-- must never wait for one).
--
-- The hour tiers stop being continuous aggregates: they become the same tables as on plain
-- PostgreSQL, computed by the same functions (_measure.condense), so both engines give the
-- same answers by construction and a backfill or an import returns with its tiers current.
-- A continuous aggregate cannot read runs anyway: the per-interval extremes (BUSY-MAX …)
-- need the intervals unpacked, and an aggregate may not call a set-returning function. The
-- materialized rows are kept as they are; the tiers and purge jobs are removed.

CREATE TABLE _measure.interval_run (
    system_id       smallint NOT NULL,
    type_code       smallint NOT NULL,
    measurement_id  integer NOT NULL,
    entity_id       bigint NOT NULL,
    record_at       timestamptz NOT NULL,
    from_at         timestamptz NOT NULL,
    delta_us        bigint NOT NULL CHECK (delta_us > 0),
    n               smallint NOT NULL CHECK (n >= 1),
    closing_kind    smallint NOT NULL CHECK (closing_kind BETWEEN 3 AND 5),
    cpu             smallint NOT NULL,
    error           smallint NOT NULL DEFAULT 0,
    counters        bigint[] NOT NULL,
    base            bigint[],
    tail            bigint[],
    nonzero         bigint,
    PRIMARY KEY (measurement_id, entity_id, record_at, from_at),
    CHECK (array_ndims(counters) = 2 AND array_length(counters, 1) = n),
    CHECK (date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01 00:00:00+00')
           = date_bin(INTERVAL '1 hour', from_at + (n - 1) * delta_us * INTERVAL '1 microsecond',
                      TIMESTAMPTZ '2000-01-01 00:00:00+00'))
) WITH (toast_tuple_target = 128);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.interval_run TO measure_writer;

DO $lz4$
BEGIN
    ALTER TABLE _measure.interval_run ALTER COLUMN counters SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this server has no lz4: interval runs are compressed with pglz';
END
$lz4$;

SELECT create_hypertable('_measure.interval_run', by_range('from_at', INTERVAL '1 day'),
                         create_default_indexes => false);
CREATE INDEX interval_run_from_brin ON _measure.interval_run USING brin (from_at);
ALTER TABLE _measure.interval_run SET (
    timescaledb.compress,
    timescaledb.compress_segmentby = 'entity_id',
    timescaledb.compress_orderby = 'measurement_id, record_at, from_at'
);

-- The hour tiers: continuous aggregates → tables with the same columns and rows.
DO $tables$
DECLARE
    v_ent text;
BEGIN
    FOREACH v_ent IN ARRAY ARRAY['cpu', 'disc', 'line', 'process', 'userdef', 'tmf'] LOOP
        EXECUTE format('CREATE TABLE _measure.%I AS SELECT * FROM _measure.%I', v_ent || '_hour_t', v_ent || '_hour');
        EXECUTE format('DROP MATERIALIZED VIEW _measure.%I CASCADE', v_ent || '_hour');
        EXECUTE format('ALTER TABLE _measure.%I RENAME TO %I', v_ent || '_hour_t', v_ent || '_hour');
        EXECUTE format('ALTER TABLE _measure.%I ADD PRIMARY KEY (system_id, entity_id, measurement_id, hour_at), '
                       'ALTER COLUMN samples SET NOT NULL, ALTER COLUMN elapsed_us SET NOT NULL, '
                       'ALTER COLUMN first_from_at SET NOT NULL, ALTER COLUMN last_to_at SET NOT NULL',
                       v_ent || '_hour');
        EXECUTE format('CREATE INDEX %I ON _measure.%I (system_id, hour_at)', v_ent || '_hour_system_hour_idx',
                       v_ent || '_hour');
        EXECUTE format('GRANT SELECT, INSERT, DELETE ON _measure.%I TO measure_writer', v_ent || '_hour');
    END LOOP;
END
$tables$;

SELECT delete_job(j.job_id) FROM timescaledb_information.jobs j
 WHERE j.proc_schema = '_measure' AND j.proc_name IN ('tiers_job', 'purge_job');
DROP PROCEDURE IF EXISTS _measure.tiers_job(integer, jsonb);
DROP PROCEDURE IF EXISTS _measure.purge_job(integer, jsonb);
