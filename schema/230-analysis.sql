-- 230: automatic analysis (issue 30): an hour-of-week baseline of every condensed hour, its
-- exceptions, and a health verdict per system-day. The functions are in
-- schema/idempotent/060-analysis.sql; what is learned and how is in docs/analysis.md.
--
--   _measure.analysis_setting   per system (no row: the defaults): how many weeks are learned,
--                               the minor and major bands in robust standard deviations, the
--                               smallest band relative to the baseline
--   _measure.baseline_item      the tier items that get a baseline, with the smallest minor
--                               band in the item's unit (so that an idle resource does not alarm)
--   _measure.hour_baseline      a tier: per system, UTC hour, entity, subject and item, the
--                               hour's value, what was learned for it from the same local hour
--                               of the weeks before (holidays left out) and its verdict
--   _measure.health_indicator   the verdict's indicators: limit, weight in the score, and the
--                               Table 1 row (symptom, report, cause, action)

CREATE TABLE _measure.analysis_setting (
    system_id       smallint PRIMARY KEY REFERENCES _measure.system ON DELETE CASCADE,
    weeks           smallint NOT NULL DEFAULT 4 CHECK (weeks BETWEEN 1 AND 52),
    minor           double precision NOT NULL DEFAULT 3 CHECK (minor > 0),
    major           double precision NOT NULL DEFAULT 5,
    relative_floor  double precision NOT NULL DEFAULT 0.25 CHECK (relative_floor >= 0),
    CHECK (major > minor)
);
GRANT SELECT ON _measure.analysis_setting TO measure_writer;

CREATE TABLE _measure.baseline_item (
    entity  text NOT NULL,
    item    text NOT NULL,
    floor   double precision NOT NULL CHECK (floor > 0),
    PRIMARY KEY (entity, item)
);
GRANT SELECT ON _measure.baseline_item TO measure_writer;

CREATE TABLE _measure.hour_baseline (
    system_id   smallint NOT NULL,
    hour_at     timestamptz NOT NULL,
    entity      text NOT NULL,
    subject     text NOT NULL,            -- as in _measure.hour_item (entity_id of a line, process …)
    item        text NOT NULL,
    value       double precision NOT NULL,
    holiday     boolean NOT NULL,         -- the hour's local day is a holiday: neither learned nor judged
    weeks       smallint NOT NULL,        -- how many earlier weeks the baseline was learned from
    median      double precision,         -- NULL: nothing to learn from
    band_low    double precision,         -- median -/+ minor x scale
    band_high   double precision,
    deviation   double precision,         -- (value - median) / scale
    severity    smallint,                 -- 0 within the band, 1 minor, 2 major; NULL not judged
    PRIMARY KEY (system_id, hour_at, entity, subject, item)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.hour_baseline TO measure_writer;
CREATE INDEX hour_baseline_severity ON _measure.hour_baseline (system_id, hour_at) WHERE severity > 0;

CREATE TABLE _measure.health_indicator (
    indicator    text PRIMARY KEY CHECK (indicator ~ '^[a-z][a-z0-9_]*$'),
    ord          smallint NOT NULL,
    limit_value  double precision NOT NULL,
    weight       smallint NOT NULL CHECK (weight BETWEEN 0 AND 100),
    symptom      text NOT NULL,
    report       text NOT NULL,
    cause        text NOT NULL,
    action       text NOT NULL
);
GRANT SELECT ON _measure.health_indicator TO measure_writer;
