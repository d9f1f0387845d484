-- 010-tiers: the performance data base of 1986 (ENFORM Figures 5-9), storage part.
--
-- Tiers, bottom up (docs/enform-reports.md §1-4):
--   hour   _measure.{cpu,disc,line,process,userdef,tmf}_hour, one row per system, entity,
--          measurement and UTC hour, from _measure.interval_record (010-tiers.plain.sql:
--          tables kept by _measure.condense; 010-tiers.timescale.sql: continuous aggregates).
--          Sums of counter deltas, elapsed time, sample count and the min/max of the
--          interval values (RATE ON) of that hour. An interval belongs to the hour of its
--          FROM-TIMESTAMP.
--   shift  _measure.tier_shift  per system, subject, item, shift day, shift (local time)
--   month  _measure.tier_month  per system, subject, item, calendar month, shift
--   year   _measure.tier_year   per system, subject, item, calendar year, shift
--          The upper tiers are "long" (one row per ENFORM item) and shared by both
--          branches; the public views measure.<entity>_<tier> pivot them back into
--          ENFORM columns (QLEN-AVG-D ...). Every bucket keeps the time-weighted sum
--          (value x weight), the weight (elapsed time, or the denominator of a ratio),
--          min and max of the values below it, hours with data and coverage.
--
-- Hours are UTC hours. For every time zone whose offset is a whole number of hours (all
-- NonStop sites we model) a UTC hour is exactly one local hour; a zone with a half-hour
-- offset would get hours labelled hh:30 local (documented limitation, kept because
-- TimescaleDB cannot bucket in a per-row time zone: timescaledb#4662, #4825).
-- Shift days, months and years are cut in the system's own time zone (_measure.system).
--
-- Double counting: two measurements may measure the same entity over the same time (a
-- CPLNDAY measurement plus an ad-hoc one). The hour tier keeps one row per measurement;
-- every reading (views, shift tier, reports) takes, per entity and hour, only the row of
-- the measurement with the most measured time in that hour (ties: the lower
-- measurement_id, i.e. the one started first). So an hour is never counted twice and the
-- best-covered measurement wins.

-- Shifts are data, per system (system_id NULL = the default for every system without
-- shifts of its own). An hour belongs to the shift whose [begin, end) holds its local
-- start time; end <= begin means the shift crosses midnight and belongs to the day it
-- began. end '24:00' is the end of the day.
CREATE TABLE _measure.shift (
    shift_id    integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    system_id   smallint REFERENCES _measure.system ON DELETE CASCADE,
    shift_no    smallint NOT NULL CHECK (shift_no BETWEEN 1 AND 9),
    begin_time  time NOT NULL CHECK (begin_time < time '24:00'),
    end_time    time NOT NULL,
    name        text NOT NULL DEFAULT '',
    CHECK (extract(minute FROM begin_time) = 0 AND extract(second FROM begin_time) = 0),
    CHECK (extract(minute FROM end_time) = 0 AND extract(second FROM end_time) = 0)
);
CREATE UNIQUE INDEX shift_system_no_key ON _measure.shift (coalesce(system_id, -1), shift_no);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.shift TO measure_writer;

-- "24 hourly reports can be condensed into three 8-hour shift reports".
INSERT INTO _measure.shift (system_id, shift_no, begin_time, end_time, name) VALUES
    (NULL, 1, '00:00', '08:00', 'night'),
    (NULL, 2, '08:00', '16:00', 'day'),
    (NULL, 3, '16:00', '24:00', 'evening');

-- Thresholds are data (Figure 9: "Each system has its own set of threshold items and
-- values"). item names a column of the public hour view measure.<entity>_hour
-- (busy_max, qlen_delt ...). system_id NULL = default; a system's own row for the same
-- (entity, item, operator) replaces the default. enabled = false switches a default off
-- for one system.
CREATE TABLE _measure.threshold (
    threshold_id  integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    system_id     smallint REFERENCES _measure.system ON DELETE CASCADE,
    entity        text NOT NULL CHECK (entity IN ('cpu', 'disc', 'line', 'process', 'userdef', 'tmf')),
    item          text NOT NULL CHECK (item ~ '^[a-z][a-z0-9_]*$'),
    operator      text NOT NULL CHECK (operator IN ('>', '>=', '<', '<=')),
    limit_value   numeric NOT NULL,
    enabled       boolean NOT NULL DEFAULT true,
    help          text NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX threshold_key ON _measure.threshold (coalesce(system_id, -1), entity, item, operator);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.threshold TO measure_writer;

INSERT INTO _measure.threshold (system_id, entity, item, operator, limit_value, help) VALUES
    (NULL, 'cpu', 'qlen_max',  '>', 2,  'Figure 9: qlen-max-d > 2'),
    (NULL, 'cpu', 'qlen_delt', '>', 1,  'Figure 9: qlen-delt > 1'),
    (NULL, 'cpu', 'swap_max',  '>', 2,  'Figure 9: swap-max-d > 2 (swaps per second)'),
    (NULL, 'cpu', 'busy_max',  '>', 70, 'Figure 9: busy-max-d > 70'),
    (NULL, 'cpu', 'busy_delt', '>', 20, 'Figure 9: busy-delt > 20'),
    (NULL, 'cpu', 'ibusy_max', '>', 25, 'Figure 9: ibusy-max-d > 25'),
    (NULL, 'process', 'pqlen_max', '>', 2, '$RECEIVE queue (Figure 7 PQLEN)'),
    (NULL, 'process', 'busy_max', '>', 50, 'one process busy more than half a CPU'),
    (NULL, 'disc', 'busy_max', '>', 60, 'DISC BUSY'),
    (NULL, 'disc', 'qlen_max', '>', 2, 'REQ QLEN'),
    (NULL, 'line', 'write_busy_max', '>', 70, 'line WRITE BUSY'),
    (NULL, 'line', 'read_busy_max', '>', 90, 'line READ BUSY (includes waiting for input)');

-- Which process is which component of the transaction-resource report (ATM article,
-- Table 4/5): the first matching row by priority wins; patterns are SQL LIKE patterns on
-- the upper-case program file name or process name. system_id NULL = every system.
CREATE TABLE _measure.component_map (
    component_map_id  integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    system_id         smallint REFERENCES _measure.system ON DELETE CASCADE,
    priority          smallint NOT NULL DEFAULT 100,
    match_on          text NOT NULL CHECK (match_on IN ('program_file_name', 'process_name')),
    pattern           text NOT NULL,
    component         text NOT NULL CHECK (component IN ('tmf_disc', 'line_handler', 'tcp',
                                                         'hls', 'server', 'other'))
);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.component_map TO measure_writer;

INSERT INTO _measure.component_map (system_id, priority, match_on, pattern, component) VALUES
    (NULL, 10, 'program_file_name', '%.SYSTEM.TMP%', 'tmf_disc'),
    (NULL, 10, 'program_file_name', '%.SYSTEM.AUDSERV%', 'tmf_disc'),
    (NULL, 10, 'program_file_name', '%.SYSTEM.BACKOUT%', 'tmf_disc'),
    (NULL, 10, 'program_file_name', '%.SYSTEM.DP2%', 'tmf_disc'),
    (NULL, 11, 'process_name', '$DATA%', 'tmf_disc'),
    (NULL, 11, 'process_name', '$AUDIT%', 'tmf_disc'),
    (NULL, 11, 'process_name', '$SYSTEM%', 'tmf_disc'),
    (NULL, 20, 'program_file_name', '%.SYSTEM.X25AM', 'line_handler'),
    (NULL, 20, 'program_file_name', '%.SYSTEM.AM6520%', 'line_handler'),
    (NULL, 20, 'program_file_name', '%.SYSTEM.SNAXLH%', 'line_handler'),
    (NULL, 21, 'process_name', '$X25%', 'line_handler'),
    (NULL, 30, 'program_file_name', '%.SYSTEM.PATHTCP%', 'tcp'),
    (NULL, 31, 'process_name', '$TCP%', 'tcp'),
    (NULL, 40, 'program_file_name', '%.SYSTEM.HLS', 'hls'),
    (NULL, 50, 'program_file_name', '$APPL.%', 'server');

-- Hours whose tiers must be (re)computed: written by _measure.note_intervals after every
-- COPY slice (late data included), consumed by _measure.condense.
CREATE TABLE _measure.tier_dirty (
    system_id  smallint NOT NULL,
    hour_at    timestamptz NOT NULL,
    noted_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (system_id, hour_at)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.tier_dirty TO measure_writer;

-- The upper tiers (shared by both branches). subject: the CPU number for cpu and tmf,
-- the volume name for disc (paths folded), the entity_id for line, process and userdef.
-- avg = wsum / weight; vmin/vmax = min/max of the values of the tier below;
-- delt_max = the largest (max - min) of the tier below (month, year).
CREATE TABLE _measure.tier_shift (
    system_id    smallint NOT NULL,
    entity       text NOT NULL,
    subject      text NOT NULL,
    item         text NOT NULL,
    shift_day    date NOT NULL,
    shift_no     smallint NOT NULL,
    hours        smallint NOT NULL,          -- hours of the shift with data
    shift_hours  numeric NOT NULL,           -- real length of the shift that day (DST)
    samples      integer NOT NULL,
    elapsed_us   bigint NOT NULL,
    wsum         numeric NOT NULL,
    weight       numeric NOT NULL,
    vmin         numeric,
    vmax         numeric,
    condensed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (system_id, entity, shift_day, shift_no, subject, item)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.tier_shift TO measure_writer;

CREATE TABLE _measure.tier_month (
    system_id    smallint NOT NULL,
    entity       text NOT NULL,
    subject      text NOT NULL,
    item         text NOT NULL,
    month        date NOT NULL CHECK (extract(day FROM month) = 1),
    shift_no     smallint NOT NULL,
    shifts       smallint NOT NULL,          -- shift days with data
    hours        integer NOT NULL,
    shift_hours  numeric NOT NULL,
    samples      integer NOT NULL,
    elapsed_us   bigint NOT NULL,
    wsum         numeric NOT NULL,
    weight       numeric NOT NULL,
    vmin         numeric,
    vmax         numeric,
    delt_max     numeric,
    condensed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (system_id, entity, month, shift_no, subject, item)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.tier_month TO measure_writer;

CREATE TABLE _measure.tier_year (
    system_id    smallint NOT NULL,
    entity       text NOT NULL,
    subject      text NOT NULL,
    item         text NOT NULL,
    year         smallint NOT NULL,
    shift_no     smallint NOT NULL,
    months       smallint NOT NULL,
    hours        integer NOT NULL,
    shift_hours  numeric NOT NULL,
    samples      integer NOT NULL,
    elapsed_us   bigint NOT NULL,
    wsum         numeric NOT NULL,
    weight       numeric NOT NULL,
    vmin         numeric,
    vmax         numeric,
    delt_max     numeric,
    condensed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (system_id, entity, year, shift_no, subject, item)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.tier_year TO measure_writer;
