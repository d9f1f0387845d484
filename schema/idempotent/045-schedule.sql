-- 045-schedule: the public side of scheduled reports (storage: schema/030-schedule.sql;
-- the scheduler: core/scheduler.py) and the two reports only the schedule needed:
-- the condensation check (queries/condensation-check.sql) and the shift summary
-- (queries/shift-summary.sql).

-- ---------------------------------------------------------------- definitions and runs

CREATE OR REPLACE VIEW measure.report_definition AS
SELECT d.definition_id, d.name, d.report, s.system_name, d.parameters, d.schedule, d.outputs,
       d.enabled, d.description, d.created_at, d.updated_at, d.system_id
  FROM _measure.report_definition d
  LEFT JOIN _measure.system s USING (system_id);
GRANT SELECT ON measure.report_definition TO measure_writer, measure_api, measure_reader;
COMMENT ON VIEW measure.report_definition IS
    'Scheduled reports (the 1986 OBEY files): report = queries/<report>.sql, schedule = 5-field cron in the system''s local time, system_name NULL = every system.';

-- status: running (claimed, not finished), failed (error), succeeded.
CREATE OR REPLACE VIEW measure.report_run AS
SELECT r.run_id, r.definition_id, d.name AS definition, r.report, s.system_name, r.slot_at,
       (r.slot_at AT TIME ZONE s.time_zone) AS local_slot, r.parameters, r.instance,
       r.claimed_at, r.started_at, r.finished_at,
       CASE WHEN r.finished_at IS NULL THEN 'running'
            WHEN r.error IS NOT NULL THEN 'failed' ELSE 'succeeded' END AS status,
       r.rows, r.error, r.attempt, r.retry_after,
       r.output_text, r.output_csv, r.output_json, r.system_id, s.time_zone
  FROM _measure.report_run r
  JOIN _measure.report_definition d USING (definition_id)
  JOIN _measure.system s ON s.system_id = r.system_id;
GRANT SELECT ON measure.report_run TO measure_writer, measure_api, measure_reader;
COMMENT ON VIEW measure.report_run IS
    'One run per report definition, system and schedule slot (slot_at: the scheduled instant; local_slot in the system''s zone). output_json holds the rows; output_text / output_csv the renderings the definition asked for.';

-- ---------------------------------------------------------------- condensation check

-- The hours of one local day (23, 24 or 25 of them) whose tiers are missing or incomplete:
-- measured entities (interval records of the entity types with tiers) against
-- the entities with an hour-tier row, the hour still waiting to be condensed (tier_dirty),
-- the least CPU coverage (measured time / hour, of the measurement the tiers use), and whether the shift and month tiers of
-- the hour's shift exist. One row per hour that is not fine; no rows = every hour complete.
-- problems (comma-separated): 'no data', 'not condensed', 'pending', 'partly condensed', 'partial coverage',
-- 'no shift tier', 'no month tier'.
-- (The dirty hours and the shift and month tiers are read once each and joined, not by a
-- subquery per hour: Citus runs no subquery that correlates a distributed table with a
-- CTE's rows, and the one definition then serves every engine.)
CREATE OR REPLACE FUNCTION measure.report_condensation_check(p_system text, p_day date)
RETURNS TABLE (hour_at timestamptz, time_of_day text, loadid text, shift_day date, shift_no smallint,
               measured integer, condensed integer, coverage_min numeric, pending boolean,
               shift_tier boolean, month_tier boolean, problems text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET work_mem = '64MB' AS $$
    WITH sys AS (
        SELECT s.system_id AS id, s.time_zone AS tz,
               (p_day + time '00:00') AT TIME ZONE s.time_zone AS lo,
               (p_day + 1 + time '00:00') AT TIME ZONE s.time_zone AS hi
          FROM _measure.system s WHERE s.system_id = measure.system_id_of(p_system)),
    hours AS (
        SELECT h AS hour_at FROM sys, generate_series(sys.lo, sys.hi - INTERVAL '1 hour', INTERVAL '1 hour') h),
    raw AS (  -- distinct (hour, entity) by hashing: a ref16 day is 360,000 runs
        SELECT x.hour_at, count(*)::integer AS n
          FROM (SELECT DISTINCT _measure.hour_of(r.from_at) AS hour_at, r.entity_id
                  FROM sys, _measure.interval_run r
                 WHERE r.system_id = sys.id AND r.from_at >= sys.lo AND r.from_at < sys.hi
                   AND r.type_code = ANY (ARRAY(SELECT type_code FROM _measure.entity_type   -- a filter
                          WHERE entity = ANY (_measure.tiered_entities())))) x   -- of the scan
         GROUP BY 1),
    tier AS (  -- distinct (hour, entity) by hashing too, then per hour
        SELECT x.hour_at, count(*)::integer AS n, min(x.cpu_us) / 3.6e9 AS coverage_min
          FROM (SELECT t.hour_at, t.entity_id, min(t.elapsed_us) FILTER (WHERE t.is_cpu) AS cpu_us
                  FROM sys, (SELECT system_id, hour_at, entity_id, elapsed_us, true AS is_cpu FROM _measure.cpu_hour_best
                             UNION ALL SELECT system_id, hour_at, entity_id, elapsed_us, false FROM _measure.disc_hour
                             UNION ALL SELECT system_id, hour_at, entity_id, elapsed_us, false FROM _measure.line_hour
                             UNION ALL SELECT system_id, hour_at, entity_id, elapsed_us, false FROM _measure.process_hour
                             UNION ALL SELECT system_id, hour_at, entity_id, elapsed_us, false FROM _measure.userdef_hour
                             UNION ALL SELECT system_id, hour_at, entity_id, elapsed_us, false FROM _measure.tmf_hour) t
                 WHERE t.system_id = sys.id AND t.hour_at >= sys.lo AND t.hour_at < sys.hi
                 GROUP BY t.hour_at, t.entity_id) x
         GROUP BY x.hour_at),
    sh AS MATERIALIZED (
        SELECT h.hour_at, s.shift_day, s.shift_no
          FROM sys CROSS JOIN hours h LEFT JOIN LATERAL _measure.shift_of(sys.id, h.hour_at) s ON true),
    dirty AS MATERIALIZED (
        SELECT d.hour_at FROM sys, _measure.tier_dirty d
         WHERE d.system_id = sys.id AND d.hour_at >= sys.lo AND d.hour_at < sys.hi),
    shift_tier AS MATERIALIZED (
        SELECT DISTINCT ts.shift_day, ts.shift_no FROM sys, _measure.tier_shift ts
         WHERE ts.system_id = sys.id AND ts.shift_day BETWEEN p_day - 1 AND p_day   -- (a shift belongs to
           AND (ts.shift_day, ts.shift_no) IN (SELECT shift_day, shift_no FROM sh)), -- the day it began)
    month_tier AS MATERIALIZED (
        SELECT DISTINCT tm.month, tm.shift_no FROM sys, _measure.tier_month tm
         WHERE tm.system_id = sys.id
           AND tm.month BETWEEN date_trunc('month', p_day - 1)::date AND date_trunc('month', p_day)::date
           AND (tm.month, tm.shift_no) IN (SELECT date_trunc('month', shift_day)::date, shift_no FROM sh)),
    checked AS (
        SELECT h.hour_at, (h.hour_at AT TIME ZONE sys.tz) AS local_hour, sh.shift_day, sh.shift_no,
               coalesce(raw.n, 0) AS measured, coalesce(tier.n, 0) AS condensed,
               round(tier.coverage_min, 4) AS coverage_min,
               dirty.hour_at IS NOT NULL AS pending,
               st.shift_day IS NOT NULL AS shift_tier,
               mt.month IS NOT NULL AS month_tier
          FROM sys CROSS JOIN hours h
          LEFT JOIN raw USING (hour_at)
          LEFT JOIN tier USING (hour_at)
          JOIN sh USING (hour_at)
          LEFT JOIN dirty USING (hour_at)
          LEFT JOIN shift_tier st ON st.shift_day = sh.shift_day AND st.shift_no = sh.shift_no
          LEFT JOIN month_tier mt ON mt.month = date_trunc('month', sh.shift_day)::date AND mt.shift_no = sh.shift_no)
    SELECT c.hour_at, to_char(c.local_hour, 'HH24:MI'), measure.loadid(c.local_hour), c.shift_day, c.shift_no,
           c.measured, c.condensed, c.coverage_min, c.pending, c.shift_tier, c.month_tier,
           array_to_string(p.problems, ', ')
      FROM checked c
     CROSS JOIN LATERAL (SELECT array_remove(ARRAY[
               CASE WHEN c.measured = 0 AND c.condensed = 0 THEN 'no data' END,
               CASE WHEN c.measured > 0 AND c.condensed = 0 THEN 'not condensed' END,
               CASE WHEN c.pending THEN 'pending' END,
               CASE WHEN c.condensed > 0 AND c.condensed < c.measured THEN 'partly condensed' END,
               CASE WHEN c.coverage_min < 0.999 THEN 'partial coverage' END,
               CASE WHEN c.condensed > 0 AND NOT c.shift_tier THEN 'no shift tier' END,
               CASE WHEN c.condensed > 0 AND NOT c.month_tier THEN 'no month tier' END], NULL) AS problems) p
     WHERE cardinality(p.problems) > 0
     ORDER BY c.hour_at
$$;
REVOKE ALL ON FUNCTION measure.report_condensation_check(text, date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_condensation_check(text, date) TO measure_writer, measure_api, measure_reader;

-- ---------------------------------------------------------------- shift summary

-- Figure 6 (CPUSHFT<n>) over a range of shift days: per CPU, shift day and shift the
-- shift-tier items, with the hours that had data and the coverage.
CREATE OR REPLACE FUNCTION measure.report_shift_summary(p_system text, p_from date, p_to date)
RETURNS TABLE (cpu smallint, shift_day date, shift_no smallint, hours smallint, coverage_ratio numeric,
               qlen_avg numeric, qlen_max numeric, qlen_delt numeric, swap_avg numeric, swap_max numeric,
               busy_avg numeric, busy_max numeric, busy_min numeric, busy_delt numeric,
               ibusy_avg numeric, ibusy_max numeric, sbusy_avg numeric, sbusy_max numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT v.cpu::smallint, v.shift_day, v.shift_no, v.hours::smallint, round(v.coverage_ratio, 4),
           v.qlen_avg, v.qlen_max, v.qlen_delt, v.swap_avg, v.swap_max,
           v.busy_avg, v.busy_max, v.busy_min, v.busy_delt, v.ibusy_avg, v.ibusy_max, v.sbusy_avg, v.sbusy_max
      FROM measure.cpu_shift v
     WHERE v.system_id = measure.system_id_of(p_system) AND v.shift_day BETWEEN p_from AND p_to
     ORDER BY v.shift_day, v.shift_no, v.cpu
$$;
REVOKE ALL ON FUNCTION measure.report_shift_summary(text, date, date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_shift_summary(text, date, date) TO measure_writer, measure_api, measure_reader;
