-- 070-tiers-upkeep: the lines of the threshold report decided at condense time (both
-- branches); with TimescaleDB, a compression order that covers the raw tables' primary keys
-- (070-tiers-upkeep.timescale.sql).
--
--   _measure.threshold_line  the threshold report (ENFORM Figure 9, printed as Figure 1), decided
--                            at condense time like the CPU trend line of each day
--                            (050-read-paths.sql): one row per system and CPU-hour that breaks
--                            at least one CPU threshold, with the Figure 1 numbers of that hour
--                            (from its hour-tier row, one measurement per CPU-hour) and the
--                            thresholds it breaks ("busy_max > 70", ...). Kept by
--                            _measure.condense_threshold_lines (schema/idempotent/020-tiers.sql)
--                            for the hours being condensed, right after their violations
--                            (_measure.hour_breach), and for every hour whenever the violations
--                            are rebuilt (first condensing after new hour views, or a CPU
--                            threshold edited: _measure.threshold_rebuild). The rows
--                            are complete exactly while the system's _measure.breach_state row
--                            exists; measure.report_threshold reads them then, and evaluates the
--                            thresholds on the hour tier otherwise. Time of day, shift and OS
--                            version are joined when read.

CREATE TABLE _measure.threshold_line (
    system_id    smallint NOT NULL,
    hour_at      timestamptz NOT NULL,
    cpu          smallint NOT NULL,
    qlen_max     numeric,
    qlen_delt    numeric,
    swap_max     numeric,
    busy_max     numeric,
    busy_delt    numeric,
    ibusy_max    numeric,
    qlen_avg     numeric,
    swap_avg     numeric,
    busy_avg     numeric,
    ibusy_avg    numeric,
    broken       text[] NOT NULL,
    PRIMARY KEY (system_id, hour_at, cpu)
);
GRANT SELECT, INSERT, DELETE ON _measure.threshold_line TO measure_writer;

-- A database condensed before this version has violations but no lines: its stored
-- violations count as incomplete, so the next condensing rebuilds both (the reports
-- evaluate the thresholds on the hour tier until then).
DELETE FROM _measure.breach_state;
