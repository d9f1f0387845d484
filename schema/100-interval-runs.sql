-- 100-interval-runs: one raw form at MEASURE scale (issue 14), shared part.
--
-- Until 090 every interval was stored twice, one row per entity and minute: as a cumulative
-- copy (_measure.counter_copy) and as an interval record (_measure.interval_record), 54 bytes
-- per counter value with their indexes. From here interval records are stored once, packed
-- into runs (_measure.interval_run, 100-interval-runs.plain.sql / .timescale.sql): one row
-- per counter record holding its consecutive intervals of equal DELTA-TIME within one UTC
-- hour, counters as a two-dimensional array [interval][counter]. A 16-CPU node-day at
-- 1-minute intervals (ref16: 21.4 M intervals, 288.5 M counter values) is about 360,000 rows.
-- Copies are derived (measure.counter_copy): a run's interval i closes with the copy
-- base + the deltas up to i; the base is the cumulative copy that opened the run, kept on
-- the first run of each counter record in each UTC day (and of each chain), so every daily
-- partition derives its copies alone. The copies that close no interval are kept as they
-- are in _measure.extra_copy below. A run also says which of its counters are nonzero in
-- some interval (`nonzero`, bit p-1 for counter p; NULL: unknown), so that a reader of a few
-- counters (the DISCOPEN summary's input and output calls, transactions) skips the idle runs
-- without decompressing them.
--
-- This file: the tables both engines share. 101-interval-runs-migrate.sql moves the data of
-- an existing database into the new layout and drops the old tables.

-- Copies that close no interval: start and initial-value copies (copy_kind 1, 2), copies
-- with MEASURE's ERROR 1/2 (zero counters), and copies that found no open interval to
-- close. Small: about one row per counter record and measurement.
CREATE TABLE _measure.extra_copy (
    measurement_id  integer NOT NULL,
    entity_id       bigint NOT NULL,
    record_at       timestamptz NOT NULL,
    copy_at         timestamptz NOT NULL,
    copy_kind       smallint NOT NULL CHECK (copy_kind BETWEEN 1 AND 5),
    system_id       smallint NOT NULL,
    type_code       smallint NOT NULL,
    cpu             smallint NOT NULL,
    error           smallint NOT NULL DEFAULT 0,
    counters        bigint[] NOT NULL,
    PRIMARY KEY (measurement_id, entity_id, record_at, copy_at, copy_kind)
);
CREATE INDEX extra_copy_copy_at_idx ON _measure.extra_copy (copy_at);
GRANT SELECT, INSERT, DELETE ON _measure.extra_copy TO measure_writer;

-- Hours that may hold more runs per counter record than needed (written a minute at a time by
-- live collection, or late data); _measure.pack_runs merges them (schema/idempotent/015-runs.sql).
CREATE TABLE _measure.pack_todo (
    hour_at   timestamptz PRIMARY KEY,
    noted_at  timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.pack_todo TO measure_writer;

-- Hours whose month-level rows (month and year tiers, monthly record, DISCOPEN, terminal and
-- threshold rollups) are not recomputed yet: condensing during a backfill or live collection
-- defers them (their cost grows with the days of the month so far) to the end of the backfill
-- and to the upkeep (_measure.condense_pending_months, schema/idempotent/020-tiers.sql).
CREATE TABLE _measure.month_dirty (
    system_id  smallint NOT NULL,
    hour_at    timestamptz NOT NULL,
    PRIMARY KEY (system_id, hour_at)
);
GRANT SELECT, INSERT, DELETE ON _measure.month_dirty TO measure_writer;

-- Retention as data (issue 14): how long each class of data is kept (NULL: for ever).
--   raw    interval runs and extra copies (whole daily partitions / chunks are dropped)
--   hour   the hour tiers and everything per UTC hour (record, DISCOPEN and terminal hours,
--          response histograms, threshold breaches and lines, measurement shadows)
--   day    shift tiers, per-day record/DISCOPEN/histogram rows, shift rollups
--   month  month and year tiers, per-month rows, monthly rollups, the CPU trend line
-- Each class is kept at least as long as the one before it (checked by the writers of
-- this table: _measure.retention_set).
CREATE TABLE _measure.retention (
    class       text PRIMARY KEY CHECK (class IN ('raw', 'hour', 'day', 'month')),
    keep        interval CHECK (keep IS NULL OR keep >= INTERVAL '1 day'),
    ord         smallint NOT NULL UNIQUE,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO _measure.retention (class, keep, ord) VALUES
    ('raw', INTERVAL '35 days', 1),
    ('hour', INTERVAL '400 days', 2),
    ('day', INTERVAL '1830 days', 3),
    ('month', NULL, 4);
GRANT SELECT, UPDATE ON _measure.retention TO measure_writer;

-- What retention removed, per class: nothing before `purged_before` is ever recomputed
-- from the class below (a recondense of such hours keeps their tiers as they are).
CREATE TABLE _measure.purged (
    class          text PRIMARY KEY REFERENCES _measure.retention (class),
    purged_before  timestamptz NOT NULL
);
GRANT SELECT, INSERT, UPDATE ON _measure.purged TO measure_writer;
INSERT INTO _measure.purged (class, purged_before)
SELECT 'raw', purged_before FROM _measure.raw_horizon;

-- Every purge (and every dry run), with what it removed or would remove, and what held it
-- back (hours not yet condensed into every tier they feed).
CREATE TABLE _measure.purge_log (
    purge_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at  timestamptz,
    dry_run      boolean NOT NULL,
    requested_by text NOT NULL,
    now_at       timestamptz NOT NULL,
    removed      jsonb NOT NULL DEFAULT '[]',   -- [{class, cutoff, object, rows}, …]
    held_back    jsonb NOT NULL DEFAULT '[]'    -- [{class, cutoff, reason, hours: […]}, …]
);
GRANT SELECT, INSERT, UPDATE ON _measure.purge_log TO measure_writer;

-- API tokens may now also be admin tokens (retention, and later configuration).
ALTER TABLE _measure.api_token DROP CONSTRAINT api_token_scope_check;
ALTER TABLE _measure.api_token ADD CONSTRAINT api_token_scope_check
    CHECK (scope IN ('read', 'write', 'admin'));
