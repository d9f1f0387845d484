-- 060-dashboard-rollups: what the dashboards read at long ranges, resolved when hours are
-- condensed (issue 7). Shared by both branches; kept by functions of
-- schema/idempotent/040-dashboards.sql that _measure.condense_upper calls (plain: from
-- _measure.condense; TimescaleDB: from the tiers job, after the hour aggregates of the same
-- hours are refreshed).
--
--   _measure.threshold_rollup  the threshold items (the columns of measure.<entity>_hour that
--                              a threshold in force names) per system, subject, shift and
--                              month: extremes over the hours, hours with a value, and hours
--                              that broke a threshold of the item (the rows of
--                              _measure.hour_breach, 050-read-paths.sql). The threshold
--                              dashboard reads it for ranges past 7 days (a year of the
--                              reference node: 1.3 million shift rows, 44,000 month rows).
--                              Complete for a system while _measure.breach_state has its row,
--                              like _measure.hour_breach; rebuilt with it.
--   _measure.terminal_hour     TERMINAL counters per terminal and UTC hour (one measurement
--                              per entity-hour, the one with the most measured time; ties:
--                              the lower measurement_id), from the interval records, which
--                              are kept ~35 days; these rows stay, as the hour tiers do.
--   _measure.terminal_rollup   the same per shift and per month (sums and the largest
--                              interval response), for ranges past 7 days.
--
-- An upgraded database: the threshold rows are built by the first condensing after the
-- upgrade (040-dashboards.sql marks every system incomplete: one rebuild of all its hours,
-- ~1 minute for a year of a 16-CPU node). Terminal rows exist for the hours condensed from
-- this version on; `SELECT _measure.recondense(system_id, from, to)` adds those of older
-- hours whose interval records are still kept.

CREATE TABLE _measure.threshold_rollup (
    system_id     smallint NOT NULL,
    grain         text NOT NULL CHECK (grain IN ('shift', 'month')),
    entity        text NOT NULL,
    item          text NOT NULL,            -- '*': any threshold item of the subject
    start_at      timestamptz NOT NULL,     -- the shift's start, or the month's first local midnight
    shift_no      smallint NOT NULL,
    subject       text NOT NULL,
    end_at        timestamptz NOT NULL,
    bucket        date NOT NULL,            -- shift day, or the month's first day
    hours         integer NOT NULL,         -- hours with a value of the item
    vmax          numeric,
    vmin          numeric,
    broken_hours  integer NOT NULL,         -- hours that broke a threshold of the item ('*': of any item)
    rules         text,                     -- the thresholds in force on the item: '> 70', '< 5, > 90'
    low           boolean NOT NULL DEFAULT false,  -- all of them lower limits (vmin is what breaks)
    PRIMARY KEY (system_id, grain, entity, item, start_at, shift_no, subject)
);
CREATE INDEX threshold_rollup_time_idx ON _measure.threshold_rollup (system_id, grain, start_at);
GRANT SELECT, INSERT, DELETE ON _measure.threshold_rollup TO measure_writer;

CREATE TABLE _measure.terminal_hour (
    system_id       smallint NOT NULL,
    hour_at         timestamptz NOT NULL,
    entity_id       bigint NOT NULL,
    measurement_id  integer NOT NULL,
    samples         integer NOT NULL,
    elapsed_us      bigint NOT NULL,
    requests        bigint NOT NULL,
    reads           bigint NOT NULL,
    writes          bigint NOT NULL,
    transactions    bigint NOT NULL,
    input_bytes     bigint NOT NULL,
    output_bytes    bigint NOT NULL,
    response_us     bigint NOT NULL,
    response_max_us numeric,                -- largest interval average (RESPONSE-TIME / TRANSACTIONS)
    PRIMARY KEY (system_id, hour_at, entity_id)
);
GRANT SELECT, INSERT, DELETE ON _measure.terminal_hour TO measure_writer;

CREATE TABLE _measure.terminal_rollup (
    system_id       smallint NOT NULL,
    grain           text NOT NULL CHECK (grain IN ('shift', 'month')),
    start_at        timestamptz NOT NULL,   -- the shift's start, or the month's first local midnight
    shift_no        smallint NOT NULL,
    entity_id       bigint NOT NULL,
    end_at          timestamptz NOT NULL,
    bucket          date NOT NULL,          -- shift day, or the month's first day
    hours           integer NOT NULL,
    samples         integer NOT NULL,
    elapsed_us      bigint NOT NULL,
    requests        bigint NOT NULL,
    reads           bigint NOT NULL,
    writes          bigint NOT NULL,
    transactions    bigint NOT NULL,
    input_bytes     bigint NOT NULL,
    output_bytes    bigint NOT NULL,
    response_us     bigint NOT NULL,
    response_max_us numeric,
    PRIMARY KEY (system_id, grain, start_at, shift_no, entity_id)
);
GRANT SELECT, INSERT, DELETE ON _measure.terminal_rollup TO measure_writer;
