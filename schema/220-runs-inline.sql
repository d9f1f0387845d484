-- 220: the interval runs' counters stay in their row, compressed (issue 31, item 3).
--
-- Until here the counters, base and tail arrays of _measure.interval_run had the default
-- storage (EXTENDED) and every partition a toast_tuple_target of 128 bytes, meant to have short
-- runs compressed too; what it did was move a compressed run still over 128 bytes (nearly every
-- run: a DISCOPEN run of an hour compresses to about 230 bytes) out of line into TOAST, one
-- TOAST row of its own (a tuple header, chunk id and sequence) and a TOAST index entry per run,
-- plus an 18-byte pointer in the heap row. Storage MAIN compresses the same runs and moves a
-- value out of line only when the row would not fit a page. Measured
-- on a ref16 day (bench/bench_density.py, bench/RESULTS.md): the runs with their indexes
-- 0.78 → 0.67 bytes per counter value as the writer stores them (0.64 after the rewrite below),
-- everything 0.95 → 0.84; nothing else changes (the values, the `nonzero`
-- skip, every reader: a reader that skips a run by `nonzero` still never decompresses it).
-- (What toast_tuple_target = 128 does not do, measured: a row shorter than PostgreSQL's fixed
-- TOAST threshold, about 2 kB, is never compressed at all, whatever the target: a USERDEF run
-- of an hour, 120 values, is stored raw at 8.3 bytes per value. Left as it is: those runs are
-- about 5 % of the runs' bytes.)
--
-- Existing data, in place: on plain PostgreSQL every daily partition is rewritten once (an
-- ALTER of `nonzero` to its own type with an expression, which rewrites the table and stores
-- each row's arrays anew, in the row; its values are unchanged). It holds the runs locked while
-- it rewrites them and, in one transaction, needs room for a second copy of all the runs until
-- it commits.
-- Not on TimescaleDB: it refuses a storage change of a hypertable with its column store
-- enabled; there the chunks hold runs uncompressed only until the platform's upkeep compresses
-- them into TimescaleDB's own column form (MEASUREDB_COMPRESS_AFTER), which is its density.
-- Not on Citus (interval_run distributed): left for a change tested there.
--
-- (in a DO block: Citus sends an ALTER TABLE of a distributed table to the workers as its
-- query string, which here would be this whole file)
DO $inline$
DECLARE
    v_distributed boolean := false;
BEGIN
    IF (SELECT c.relkind FROM pg_class c WHERE c.oid = '_measure.interval_run'::regclass) <> 'p' THEN
        RETURN;   -- a hypertable
    END IF;
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = ''_measure.interval_run''::regclass)'
           INTO v_distributed;
    END IF;
    IF v_distributed THEN
        RETURN;
    END IF;
    ALTER TABLE _measure.interval_run ALTER COLUMN counters SET STORAGE MAIN,
                                      ALTER COLUMN base SET STORAGE MAIN,
                                      ALTER COLUMN tail SET STORAGE MAIN;
    ALTER TABLE _measure.interval_run ALTER COLUMN nonzero TYPE bigint USING nonzero + 0;
END
$inline$;
