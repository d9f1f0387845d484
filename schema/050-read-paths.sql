-- 050-read-paths: what condensing now resolves once, so that reads are index range scans
-- (issues 5 and 7). Shared by both branches; kept by _measure.condense_upper
-- (schema/idempotent/020-tiers.sql), which both branches run right after the hour tiers of
-- the condensed hours are current.
--
--   _measure.hour_shadow     "one measurement per entity and hour" (010-tiers.sql, double
--                            counting), decided at condense time: the hour-tier rows that
--                            LOST to another measurement of the same entity and hour (less
--                            measured time; ties: the higher measurement_id). Usually empty:
--                            only an entity measured twice in one hour has rows here. The
--                            views _measure.<entity>_hour_best are the hour tiers minus these
--                            rows, a plain anti-join the planner flattens into every reader
--                            (no DISTINCT ON sort over all hours before a time filter applies).
--   _measure.cpu_trend_day   the line of the CPU trend report (Figure 2) per system and local
--                            day: the hour and CPU with the largest average queue length, and
--                            the extremes over the CPUs of that hour. Names (system, LOADID,
--                            CPU type, OS version) are joined when read.
--
-- TimescaleDB: the hour tiers are refreshed by the tiers job before it runs
-- condense_upper for the same hours; between the two (seconds, one job run) an hour that two
-- measurements measured shows both rows, as a refresh shows new data before its shifts.

CREATE TABLE _measure.hour_shadow (
    system_id       smallint NOT NULL,
    entity          text NOT NULL,
    entity_id       bigint NOT NULL,
    measurement_id  integer NOT NULL,
    hour_at         timestamptz NOT NULL,
    PRIMARY KEY (system_id, entity_id, measurement_id, hour_at)
);
CREATE INDEX hour_shadow_hour_idx ON _measure.hour_shadow (system_id, hour_at);
GRANT SELECT, INSERT, DELETE ON _measure.hour_shadow TO measure_writer;

-- Existing hour tiers (an upgraded database): the losers, as the DISTINCT ON views chose.
INSERT INTO _measure.hour_shadow (system_id, entity, entity_id, measurement_id, hour_at)
SELECT system_id, entity, entity_id, measurement_id, hour_at
  FROM (SELECT 'cpu' AS entity, system_id, entity_id, measurement_id, hour_at,
               row_number() OVER (PARTITION BY system_id, entity_id, hour_at
                                  ORDER BY elapsed_us DESC, measurement_id) AS rn
          FROM _measure.cpu_hour
        UNION ALL
        SELECT 'disc', system_id, entity_id, measurement_id, hour_at,
               row_number() OVER (PARTITION BY system_id, entity_id, hour_at
                                  ORDER BY elapsed_us DESC, measurement_id)
          FROM _measure.disc_hour
        UNION ALL
        SELECT 'line', system_id, entity_id, measurement_id, hour_at,
               row_number() OVER (PARTITION BY system_id, entity_id, hour_at
                                  ORDER BY elapsed_us DESC, measurement_id)
          FROM _measure.line_hour
        UNION ALL
        SELECT 'process', system_id, entity_id, measurement_id, hour_at,
               row_number() OVER (PARTITION BY system_id, entity_id, hour_at
                                  ORDER BY elapsed_us DESC, measurement_id)
          FROM _measure.process_hour
        UNION ALL
        SELECT 'userdef', system_id, entity_id, measurement_id, hour_at,
               row_number() OVER (PARTITION BY system_id, entity_id, hour_at
                                  ORDER BY elapsed_us DESC, measurement_id)
          FROM _measure.userdef_hour
        UNION ALL
        SELECT 'tmf', system_id, entity_id, measurement_id, hour_at,
               row_number() OVER (PARTITION BY system_id, entity_id, hour_at
                                  ORDER BY elapsed_us DESC, measurement_id)
          FROM _measure.tmf_hour) x
 WHERE rn > 1;

-- Figure 2, one line per system and local day (measure.report_cpu_trend reads it). The
-- rows of days condensed before this version are computed once by
-- schema/idempotent/020-tiers.sql (it needs the views defined there).
CREATE TABLE _measure.cpu_trend_day (
    system_id    smallint NOT NULL,
    day          date NOT NULL,
    hour_at      timestamptz NOT NULL,       -- the hour of the day's largest QLEN
    entity_id    bigint NOT NULL,            -- the CPU that had it
    cpu          smallint,
    qlen_max     numeric,                    -- MAX CPU QLEN (over the CPUs in that hour)
    qlen_delt    numeric,                    -- DELT CPU QLEN
    swap_max     numeric,
    busy_max     numeric,
    busy_delt    numeric,
    condensed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (system_id, day)
);
GRANT SELECT, INSERT, DELETE ON _measure.cpu_trend_day TO measure_writer;

-- The threshold violations of every condensed hour (measure.threshold_check(..., p_broken
-- => true): the threshold report panel, the violations annotation), per system: the rows
-- of the full evaluation that break their threshold, with the threshold's operator and
-- limit. A system's rows are complete only while _measure.breach_state has its row: a
-- change of _measure.threshold (trigger) or of the hour views' definitions (the idempotent
-- schema compares a fingerprint) removes it, readers then evaluate the hours as before,
-- and the next condensing rebuilds the system's violations.
CREATE TABLE _measure.hour_breach (
    system_id    smallint NOT NULL,
    entity       text NOT NULL,
    subject      text NOT NULL,
    hour_at      timestamptz NOT NULL,
    item         text NOT NULL,
    value        numeric,
    operator     text NOT NULL,
    limit_value  numeric NOT NULL
);
CREATE INDEX hour_breach_hour_idx ON _measure.hour_breach (system_id, hour_at);
GRANT SELECT, INSERT, DELETE ON _measure.hour_breach TO measure_writer;

CREATE TABLE _measure.breach_state (
    system_id    smallint PRIMARY KEY REFERENCES _measure.system ON DELETE CASCADE,
    built_at     timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT, DELETE ON _measure.breach_state TO measure_writer;

-- The definitions the stored violations were computed with (one row).
CREATE TABLE _measure.breach_basis (
    one          boolean PRIMARY KEY DEFAULT true CHECK (one),
    fingerprint  text NOT NULL
);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.breach_basis TO measure_writer;
