-- 060-analysis: automatic analysis (issue 30; tables in schema/230-analysis.sql, the method in
-- docs/analysis.md).
--
--   _measure.condense_analysis(system, hours)   called by _measure.condense_upper (020-tiers.sql)
--       for the hours it condenses and by a calendar change (_measure.calendar_after,
--       050-config.sql) for the hours of the days it changed: stores each hour's baseline items
--       with their baseline, learned from the same local hour of the N weeks before (holidays
--       left out), and judges them; then judges again the already condensed hours of the N weeks
--       after, which learned from these. Its cost grows with the hours given, not the history.
--   measure.report_exceptions, measure.report_baseline_week, measure.report_health_verdict:
--       the reports exceptions, baseline-week and health-verdict (queries/).

-- ---------------------------------------------------------------- what is learned

-- The items with a baseline, the smallest half-width of their minor band in the item's unit
-- (measure.tier_item; terminal response: seconds) and, for queues, the smallest ratio of their
-- band (judged on the logarithm of value + floor, 240-baseline-trend.sql). Rows an operator
-- changed are kept.
INSERT INTO _measure.baseline_item (entity, item, floor, ratio) VALUES
    ('cpu', 'busy', 10, NULL), ('cpu', 'qlen', 1, 2.5),
    ('disc', 'busy', 10, NULL), ('disc', 'qlen', 0.5, 2.5),
    ('line', 'read_busy', 10, NULL), ('line', 'write_busy', 10, NULL), ('line', 'requests', 1, NULL),
    ('line', 'response', 0.5, NULL),
    ('process', 'busy', 10, NULL), ('process', 'pqlen', 1, 2.5),
    ('terminal', 'response', 0.5, NULL),
    ('userdef', 'value', 1, NULL),
    ('tmf', 'trans', 1, NULL), ('tmf', 'lifetime', 0.5, NULL)
ON CONFLICT (entity, item) DO NOTHING;

-- A system's settings (no row in _measure.analysis_setting: the defaults of its columns).
CREATE OR REPLACE FUNCTION _measure.analysis_settings(p_system smallint)
RETURNS TABLE (weeks smallint, minor double precision, major double precision, relative_floor double precision)
LANGUAGE sql STABLE AS $$
    SELECT coalesce(a.weeks, 4::smallint), coalesce(a.minor, 3), coalesce(a.major, 5), coalesce(a.relative_floor, 0.25)
      FROM (SELECT 1) one LEFT JOIN _measure.analysis_setting a ON a.system_id = p_system
$$;
GRANT EXECUTE ON FUNCTION _measure.analysis_settings(smallint) TO measure_writer;

-- The judged baseline rows of the target hours p_targets: their values (p_fresh: from the hour
-- tiers, _measure.hour_item and _measure.terminal_hour; else as stored), the baseline learned
-- from the stored values of the same local hour 1 … N weeks before that are not holidays, and
-- the verdict. Each learned value v, k weeks before, is taken as y = v (an item without a
-- ratio) or y = ln(v + floor) (with one: a queue, judged by ratio), and then
--   trend     = the mean of the week-over-week changes of y (per week) without the largest
--               and the smallest (their median up to 3 changes, 4 weeks) when y rose every week
--               learned or fell every week, with three weeks or more; else 0
--   centre    = the median of y + trend x k (each week carried forward to the hour judged; an
--               item without a ratio whose learned values are all >= 0 is not carried below 0)
--   MAD       = the median of |y + trend x k - centre| (median absolute deviation)
--   scale     = greatest(1.4826 x MAD, greatest(floor, relative_floor x |centre|) / minor)
--               with a ratio: greatest(1.4826 x MAD, ln(ratio) / minor)
--   deviation = (value's y - centre) / scale
--   severity  = 2 (major) beyond major, 1 (minor) beyond minor, else 0; NULL on a holiday or
--               with no earlier week to learn from
--   median    = the centre in the item's unit (with a ratio: exp(centre) - floor), and the band
--               centre -/+ minor x scale (the minor band) likewise.
-- With no trend and no ratio this is the median and MAD of the learned values.
CREATE OR REPLACE FUNCTION _measure.baseline_rows(p_system smallint, p_targets timestamptz[], p_fresh boolean)
RETURNS SETOF _measure.hour_baseline LANGUAGE sql STABLE
-- (its CTEs come from arrays the planner cannot count: joined by nested loops, the items of a
-- ref16 hour took minutes; hashed, well under a second)
SET enable_nestloop = off SET work_mem = '256MB' AS $$
    WITH s AS MATERIALIZED (
        SELECT a.*, y.time_zone FROM _measure.analysis_settings(p_system) a, _measure.system y
         WHERE y.system_id = p_system),
    t AS MATERIALIZED (
        SELECT DISTINCT h AS hour_at,
               EXISTS (SELECT 1 FROM _measure.holiday d
                        WHERE d.system_id = p_system AND d.day = (h AT TIME ZONE s.time_zone)::date) AS holiday
          FROM unnest(p_targets) h, s),
    cur AS MATERIALIZED (
        SELECT i.hour_at, i.entity, i.subject, i.item, i.value::double precision AS value
          FROM _measure.hour_item i JOIN _measure.baseline_item b ON b.entity = i.entity AND b.item = i.item
         WHERE p_fresh AND i.system_id = p_system AND i.hour_at = ANY (p_targets) AND i.value IS NOT NULL
        UNION ALL
        SELECT h.hour_at, 'terminal', h.entity_id::text, 'response', h.response_us / 1e6 / h.transactions
          FROM _measure.terminal_hour h
         WHERE p_fresh AND h.system_id = p_system AND h.hour_at = ANY (p_targets) AND h.transactions > 0
           AND EXISTS (SELECT 1 FROM _measure.baseline_item b WHERE b.entity = 'terminal' AND b.item = 'response')
        UNION ALL
        SELECT o.hour_at, o.entity, o.subject, o.item, o.value
          FROM _measure.hour_baseline o
         WHERE NOT p_fresh AND o.system_id = p_system AND o.hour_at = ANY (p_targets)),
    lt AS (
        SELECT t.hour_at AS target, k,
               ((t.hour_at AT TIME ZONE s.time_zone) - k * INTERVAL '7 days') AT TIME ZONE s.time_zone AS learn_at
          FROM t, s, generate_series(1, s.weeks) k),
    l AS MATERIALIZED (
        SELECT z.*,
               CASE WHEN z.nc < 2 OR (z.up <> z.nc AND z.down <> z.nc) THEN 0
                    WHEN z.nc = 2 THEN z.sc / 2
                    ELSE (z.sc - z.mx - z.mn) / (z.nc - 2) END AS trend
          FROM (SELECT x.*, count(x.change) OVER p AS nc, count(*) FILTER (WHERE x.change > 0) OVER p AS up,
                       count(*) FILTER (WHERE x.change < 0) OVER p AS down, sum(x.change) OVER p AS sc,
                       max(x.change) OVER p AS mx, min(x.change) OVER p AS mn
                  FROM (SELECT x0.*, (x0.y - lag(x0.y) OVER w) / (lag(x0.k) OVER w - x0.k) AS change  -- per week, forward in time
                          FROM (SELECT lt.target, lt.k, o.entity, o.subject, o.item,
                                       CASE WHEN b.ratio IS NULL THEN o.value ELSE ln(greatest(o.value, 0) + b.floor) END AS y
                                  FROM lt JOIN _measure.hour_baseline o ON o.system_id = p_system AND o.hour_at = lt.learn_at
                                  JOIN _measure.baseline_item b ON b.entity = o.entity AND b.item = o.item
                                 -- (the learned hours by the primary key: hashing the whole tier cost what the
                                 -- history holds)
                                 WHERE NOT o.holiday AND o.hour_at = ANY (ARRAY(SELECT lt.learn_at FROM lt))) x0
                        WINDOW w AS (PARTITION BY x0.target, x0.entity, x0.subject, x0.item ORDER BY x0.k DESC)) x
                WINDOW p AS (PARTITION BY x.target, x.entity, x.subject, x.item)) z),
    m AS MATERIALIZED (
        SELECT l.target, l.entity, l.subject, l.item, l.trend, count(*)::smallint AS weeks, min(l.y) AS low,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY l.y + l.trend * l.k) AS centre
          FROM l GROUP BY l.target, l.entity, l.subject, l.item, l.trend),
    d AS (
        SELECT l.target, l.entity, l.subject, l.item, m.weeks, m.low, m.centre,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY abs(l.y + m.trend * l.k - m.centre)) AS mad
          FROM l JOIN m USING (target, entity, subject, item)
         GROUP BY l.target, l.entity, l.subject, l.item, m.weeks, m.low, m.centre),
    j AS (
        SELECT c.*, t.holiday, coalesce(d.weeks, 0::smallint) AS weeks, b.floor, b.ratio,
               CASE WHEN b.ratio IS NULL THEN c.value ELSE ln(greatest(c.value, 0) + b.floor) END AS y,
               CASE WHEN b.ratio IS NULL AND d.low >= 0 THEN greatest(d.centre, 0) ELSE d.centre END AS centre,
               d.mad, s.minor, s.major, s.relative_floor
          FROM cur c
          JOIN t ON t.hour_at = c.hour_at
          JOIN _measure.baseline_item b ON b.entity = c.entity AND b.item = c.item
          CROSS JOIN s
          LEFT JOIN d ON d.target = c.hour_at AND d.entity = c.entity AND d.subject = c.subject AND d.item = c.item),
    v AS (
        SELECT j.*,
               CASE WHEN j.ratio IS NULL
                    THEN greatest(1.4826 * j.mad, greatest(j.floor, j.relative_floor * abs(j.centre)) / j.minor)
                    ELSE greatest(1.4826 * j.mad, ln(j.ratio) / j.minor) END AS scale
          FROM j)
    SELECT p_system, v.hour_at, v.entity, v.subject, v.item, v.value, v.holiday, v.weeks,
           CASE WHEN v.ratio IS NULL THEN v.centre ELSE exp(v.centre) - v.floor END,
           CASE WHEN v.ratio IS NULL THEN v.centre - v.minor * v.scale ELSE exp(v.centre - v.minor * v.scale) - v.floor END,
           CASE WHEN v.ratio IS NULL THEN v.centre + v.minor * v.scale ELSE exp(v.centre + v.minor * v.scale) - v.floor END,
           (v.y - v.centre) / v.scale,
           CASE WHEN v.holiday OR v.centre IS NULL THEN NULL
                WHEN abs(v.y - v.centre) > v.major * v.scale THEN 2
                WHEN abs(v.y - v.centre) > v.minor * v.scale THEN 1
                ELSE 0 END::smallint
      FROM v
$$;
GRANT EXECUTE ON FUNCTION _measure.baseline_rows(smallint, timestamptz[], boolean) TO measure_writer;

-- Judge the stored hours p_hours again (their values as stored; what they learned from may
-- have changed), a few days at a time; returns the rows judged.
CREATE OR REPLACE FUNCTION _measure.analysis_rejudge(p_system smallint, p_hours timestamptz[])
RETURNS integer LANGUAGE plpgsql SET work_mem = '256MB' AS $$
DECLARE
    v_part timestamptz[];
    v_rows integer := 0;
    v_n integer;
BEGIN
    FOR v_part IN
        SELECT array_agg(h ORDER BY h) FROM (SELECT DISTINCT h FROM unnest(p_hours) h) x
         GROUP BY floor(extract(epoch FROM x.h) / (6 * 86400)) ORDER BY 1 LOOP
        UPDATE _measure.hour_baseline o
           SET weeks = r.weeks, median = r.median, band_low = r.band_low, band_high = r.band_high,
               deviation = r.deviation, severity = r.severity
          FROM _measure.baseline_rows(p_system, v_part, false) r
         WHERE o.system_id = p_system AND o.hour_at = r.hour_at AND o.entity = r.entity
           AND o.subject = r.subject AND o.item = r.item;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_rows := v_rows + v_n;
    END LOOP;
    RETURN v_rows;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.analysis_rejudge(smallint, timestamptz[]) TO measure_writer;

-- Store and judge the given (just condensed) hours, a few days at a time in time order (an
-- hour learns from the stored hours a week and more before it, which may be in the same call:
-- a backfill), then judge again the hours of the N weeks after them that are already stored.
-- Returns the number of rows stored.
CREATE OR REPLACE FUNCTION _measure.condense_analysis(p_system smallint, p_hours timestamptz[])
RETURNS integer LANGUAGE plpgsql SET work_mem = '256MB' AS $$
DECLARE
    v_first timestamptz;
    v_part timestamptz[];
    v_later timestamptz[];
    v_rows integer := 0;
    v_n integer;
BEGIN
    -- SET measuredb.analysis = off: condensing leaves the baselines as they are (bench/bench_analysis.py
    -- measures condensing with and without them; _measure.analysis_rebuild catches up)
    IF p_hours IS NULL OR cardinality(p_hours) = 0 OR current_setting('measuredb.analysis', true) = 'off' THEN
        RETURN 0;
    END IF;
    v_first := (SELECT min(h) FROM unnest(p_hours) h);
    FOR v_part IN
        SELECT array_agg(h ORDER BY h) FROM (SELECT DISTINCT h FROM unnest(p_hours) h) x
         GROUP BY floor(extract(epoch FROM x.h - v_first) / (6 * 86400)) ORDER BY 1 LOOP
        DELETE FROM _measure.hour_baseline WHERE system_id = p_system AND hour_at = ANY (v_part);
        INSERT INTO _measure.hour_baseline SELECT * FROM _measure.baseline_rows(p_system, v_part, true);
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_rows := v_rows + v_n;
    END LOOP;
    -- the stored hours that learned from these: values unchanged, verdicts again
    v_later := ARRAY(
        SELECT DISTINCT b.hour_at FROM _measure.hour_baseline b
         WHERE b.system_id = p_system
           AND b.hour_at = ANY (ARRAY(
               SELECT ((h AT TIME ZONE y.time_zone) + k * INTERVAL '7 days') AT TIME ZONE y.time_zone
                 FROM unnest(p_hours) h, _measure.system y, _measure.analysis_settings(p_system) a,
                      generate_series(1, a.weeks) k
                WHERE y.system_id = p_system))
           AND NOT b.hour_at = ANY (p_hours));
    PERFORM _measure.analysis_rejudge(p_system, v_later);
    RETURN v_rows;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.condense_analysis(smallint, timestamptz[]) TO measure_writer;

-- Every condensed hour of a system again (after its settings changed, or hours condensed with
-- measuredb.analysis off): the hours whose hour tiers are kept; returns the rows stored.
CREATE OR REPLACE FUNCTION _measure.analysis_rebuild(p_system smallint)
RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
    RETURN _measure.condense_analysis(p_system, ARRAY(
        SELECT DISTINCT hour_at FROM _measure.cpu_hour WHERE system_id = p_system ORDER BY 1));
END
$$;
GRANT EXECUTE ON FUNCTION _measure.analysis_rebuild(smallint) TO measure_writer;

-- A database condensed before this version: the baselines of the hours it holds, once.
DO $backfill$
DECLARE
    v_sys smallint;
BEGIN
    FOR v_sys IN SELECT DISTINCT h.system_id FROM _measure.cpu_hour h
                  WHERE NOT EXISTS (SELECT 1 FROM _measure.hour_baseline b WHERE b.system_id = h.system_id) LOOP
        PERFORM _measure.condense_analysis(v_sys, ARRAY(
            SELECT DISTINCT hour_at FROM _measure.cpu_hour WHERE system_id = v_sys ORDER BY 1));
    END LOOP;
END
$backfill$;

-- Verdicts stored by an earlier judging method (_measure.analysis_method; 2: trend and ratios,
-- 240-baseline-trend.sql): every stored hour judged again, once; returns the rows judged.
CREATE OR REPLACE FUNCTION _measure.analysis_upgrade()
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_sys smallint;
    v_rows integer := 0;
BEGIN
    IF (SELECT version FROM _measure.analysis_method) >= 2 THEN
        RETURN 0;
    END IF;
    FOR v_sys IN SELECT DISTINCT system_id FROM _measure.hour_baseline LOOP
        v_rows := v_rows + _measure.analysis_rejudge(v_sys, ARRAY(
            SELECT DISTINCT hour_at FROM _measure.hour_baseline WHERE system_id = v_sys));
    END LOOP;
    UPDATE _measure.analysis_method SET version = 2;
    RETURN v_rows;
END
$$;
SELECT _measure.analysis_upgrade();

-- The name a report shows for a subject of _measure.hour_item: a CPU number, a volume, a line's
-- name, a process's name (CPU,PIN when it has none), a terminal (line.subdevice), a user
-- counter (NAME process).
CREATE OR REPLACE FUNCTION _measure.analysis_subject(p_entity text, p_subject text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_entity IN ('cpu', 'disc', 'tmf') THEN p_subject
                ELSE coalesce((
                    SELECT CASE p_entity
                               WHEN 'line' THEN e.ids->>'device_name'
                               WHEN 'process' THEN coalesce(nullif(e.ids->>'process_name', ''),
                                                            (e.ids->>'cpu') || ',' || (e.ids->>'pin'))
                               WHEN 'terminal' THEN (e.ids->>'line_name') || '.' || (e.ids->>'subdev_name')
                               WHEN 'userdef' THEN upper(e.ids->>'name') || ' '
                                                   || coalesce(nullif(e.ids->>'process_name', ''),
                                                               (e.ids->>'cpu') || ',' || (e.ids->>'pin')) END
                      FROM _measure.entity e WHERE e.entity_id = p_subject::bigint), p_subject) END
$$;
GRANT EXECUTE ON FUNCTION _measure.analysis_subject(text, text) TO measure_writer;

-- ---------------------------------------------------------------- reports

-- The exceptions of [p_from, p_to): one row per hour, entity, subject and item outside its
-- minor band (p_severity 'major': only beyond the major band).
CREATE OR REPLACE FUNCTION measure.report_exceptions(p_system text, p_from timestamptz, p_to timestamptz,
                                                     p_severity text DEFAULT NULL)
RETURNS TABLE (hour_at timestamptz, local_hour timestamp, entity text, subject text, item text,
               value double precision, baseline double precision, band_low double precision,
               band_high double precision, deviation double precision, severity text, direction text,
               weeks smallint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT b.hour_at, b.hour_at AT TIME ZONE y.time_zone, b.entity, _measure.analysis_subject(b.entity, b.subject),
           b.item, b.value, b.median, b.band_low, b.band_high, b.deviation,
           CASE b.severity WHEN 2 THEN 'major' ELSE 'minor' END,
           CASE WHEN b.value > b.median THEN 'above' ELSE 'below' END, b.weeks
      FROM _measure.hour_baseline b
      JOIN _measure.system y ON y.system_id = b.system_id
     WHERE b.system_id = measure.system_id_of(p_system) AND b.hour_at >= p_from AND b.hour_at < p_to
       AND b.severity >= CASE p_severity WHEN 'major' THEN 2 ELSE 1 END
     ORDER BY b.hour_at, b.severity DESC, abs(b.deviation) DESC, b.entity, b.subject, b.item
$$;
REVOKE ALL ON FUNCTION measure.report_exceptions(text, timestamptz, timestamptz, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_exceptions(text, timestamptz, timestamptz, text)
    TO measure_writer, measure_api, measure_reader;

-- How the hours of [p_from, p_to) were judged: hours stored, hours judged, and the fewest and
-- most earlier weeks learned from (what the reports say when there is no baseline yet).
CREATE OR REPLACE FUNCTION measure.baseline_coverage(p_system text, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (hours bigint, judged_hours bigint, weeks_min smallint, weeks_max smallint, weeks_setting smallint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT count(DISTINCT b.hour_at), count(DISTINCT b.hour_at) FILTER (WHERE b.severity IS NOT NULL),
           min(b.weeks) FILTER (WHERE NOT b.holiday), max(b.weeks) FILTER (WHERE NOT b.holiday),
           (SELECT a.weeks FROM _measure.analysis_settings(measure.system_id_of(p_system)) a)
      FROM _measure.hour_baseline b
     WHERE b.system_id = measure.system_id_of(p_system) AND b.hour_at >= p_from AND b.hour_at < p_to
       AND b.entity = 'cpu' AND b.item = 'busy'
$$;
REVOKE ALL ON FUNCTION measure.baseline_coverage(text, timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.baseline_coverage(text, timestamptz, timestamptz)
    TO measure_writer, measure_api, measure_reader;

-- "This week against its baseline": per entity, subject and item with an exception in the local
-- days [p_first, p_last], the hours judged, above and below the band, major, and the hour of the
-- largest deviation with its value and baseline.
CREATE OR REPLACE FUNCTION measure.report_baseline_week(p_system text, p_first date, p_last date)
RETURNS TABLE (entity text, subject text, item text, hours bigint, hours_above bigint, hours_below bigint,
               major_hours bigint, largest_deviation double precision, largest_at timestamp,
               largest_value double precision, largest_baseline double precision, weeks_min smallint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH y AS (SELECT system_id, time_zone FROM _measure.system WHERE system_id = measure.system_id_of(p_system)),
    b AS (
        SELECT b.*, y.time_zone FROM _measure.hour_baseline b JOIN y USING (system_id)
         WHERE b.hour_at >= (p_first + time '00:00') AT TIME ZONE y.time_zone
           AND b.hour_at < (p_last + 1 + time '00:00') AT TIME ZONE y.time_zone
           AND b.severity IS NOT NULL),
    g AS (
        SELECT b.entity, b.subject, b.item, count(*) AS hours,
               count(*) FILTER (WHERE b.severity > 0 AND b.value > b.median) AS above,
               count(*) FILTER (WHERE b.severity > 0 AND b.value < b.median) AS below,
               count(*) FILTER (WHERE b.severity = 2) AS major, min(b.weeks) AS weeks_min,
               (array_agg(b.deviation ORDER BY abs(b.deviation) DESC, b.hour_at))[1] AS top_dev,
               (array_agg(b.hour_at AT TIME ZONE b.time_zone ORDER BY abs(b.deviation) DESC, b.hour_at))[1] AS top_at,
               (array_agg(b.value ORDER BY abs(b.deviation) DESC, b.hour_at))[1] AS top_value,
               (array_agg(b.median ORDER BY abs(b.deviation) DESC, b.hour_at))[1] AS top_median
          FROM b GROUP BY b.entity, b.subject, b.item
        HAVING count(*) FILTER (WHERE b.severity > 0) > 0)
    SELECT g.entity, _measure.analysis_subject(g.entity, g.subject), g.item, g.hours, g.above, g.below, g.major,
           g.top_dev, g.top_at, g.top_value, g.top_median, g.weeks_min
      FROM g
      JOIN _measure.tier_entity te ON te.entity = g.entity OR (g.entity = 'terminal' AND te.entity = 'line')
     ORDER BY te.tier_order, g.entity, abs(g.top_dev) DESC, 2, g.item
$$;
REVOKE ALL ON FUNCTION measure.report_baseline_week(text, date, date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_baseline_week(text, date, date)
    TO measure_writer, measure_api, measure_reader;

-- ---------------------------------------------------------------- the health verdict

-- The indicators of the verdict, each with its limit, its weight in the score (the weights add
-- up to 100) and the row of Table 1 of "Performance Considerations for Application Processes"
-- (or of the capacity-planning article's indicators) it answers. A limit or weight an operator
-- changed is kept; the texts follow this file.
INSERT INTO _measure.health_indicator AS h (indicator, ord, limit_value, weight, symptom, report, cause, action) VALUES
    ('cpu_over_utilised', 1, 70, 20, 'High CPU utilisation',
     'Threshold report, CPU trend, Busy Process report',
     'Demand beyond the CPU''s capacity, or a continuously executing process',
     'Find the busiest processes (Busy Process report); move work to idle CPUs or plan capacity (capacity-forecast)'),
    ('cpu_queuing', 2, 2, 15, 'Processes waiting for a CPU',
     'Threshold report, CPU trend',
     'More ready processes than the CPU serves: a busy CPU or work at the wrong priority',
     'Spread the busy processes over the CPUs; lower the priority of batch work'),
    ('cpu_load_balance', 3, 20, 10, 'CPUs unevenly loaded',
     'Shift summary report, CPU dashboard',
     'Busy processes (servers, TCPs, disc processes) concentrated on some CPUs',
     'Move servers or primary disc processes to the idle CPUs'),
    ('disc_over_utilised', 4, 50, 10, 'High disc utilisation',
     'DISC dashboard, DISCOPEN Summary report',
     'Too many requests to one volume: hot files, no cache, a batch job on an online volume',
     'Spread the busiest files over more volumes; give the disc process more cache'),
    ('disc_queuing', 5, 1, 10, 'Requests waiting for a disc',
     'DISC dashboard, DISCOPEN Summary report',
     'A busy volume: requests arrive faster than the disc serves them',
     'Spread the busiest files over more volumes; run batch work outside the peak'),
    ('line_over_utilised', 6, 50, 10, 'High line utilisation',
     'Lines dashboard',
     'Traffic near the line''s capacity: long messages or too many terminals on one line',
     'Move terminals to other lines, shorten messages or use a faster line'),
    ('busy_high_priority_process', 7, 50, 10, 'High CPU utilization, high I/O per second and a high priority',
     'Busy Process report',
     'Batch job run at the wrong priority (or a continuously executing process)',
     'Control priorities of batch work: run it below the servers, outside the peak'),
    ('transient_processes', 8, 24, 5, 'Excessive process creations',
     'Process Summary report',
     'Programming bug causing processes to terminate, "dynamic servers" overused, or a process starting new processes',
     'Correct the error; allow more static servers (PATHWAY); keep the new process active'),
    ('dynamic_file_opens', 9, 0.1, 5, 'Large number of file opens',
     'File Summary report',
     'Programming error or dynamic process creations: files opened for each transaction',
     'Correct the program: open files once, when the process starts'),
    ('file_ios_per_transaction', 10, 30, 5, 'Large number of file I/Os per transaction',
     'Process Activity report',
     'Complex transaction, a "batch" type enquiry or a programming error',
     'Check the actual number of I/Os against the expected number; break the transaction into smaller units')
ON CONFLICT (indicator) DO UPDATE
   SET ord = excluded.ord, symptom = excluded.symptom, report = excluded.report, cause = excluded.cause,
       action = excluded.action;

-- The verdict of one local day of a system: every indicator of _measure.health_indicator, true
-- when the problem is present, with the figures that decided it (docs/analysis.md):
--   cpu_over_utilised      a CPU's hourly average busy above the limit (%)
--   cpu_queuing            a CPU's hourly average queue length above the limit
--   cpu_load_balance       the day's average busy of the busiest CPU minus the least busy one
--                          above the limit (percentage points)
--   disc_over_utilised     a volume's hourly average busy above the limit (%)
--   disc_queuing           a volume's hourly average request queue above the limit
--   line_over_utilised     a line's hourly average read or write busy above the limit (%)
--   busy_high_priority_process  an application process (priority below 200, as the Busy Process
--                          report selects) at priority 150 or more (the servers' and above)
--                          busy above the limit (% of its CPU) in an hour
--   transient_processes    processes created in the day that lived less than 10 minutes: more
--                          than the limit
--   dynamic_file_opens     disc files opened in the day (not at the measurement's start): at
--                          least 100 and more than the limit per transaction
--   file_ios_per_transaction  the day's disc I/Os (CPU DISC-IOS) per transaction (TMF, else
--                          the CPUs' terminal transactions) above the limit
-- score = 100 - the sum of the weights of the indicators present (same on every row).
CREATE OR REPLACE FUNCTION measure.report_health_verdict(p_system text, p_day date)
RETURNS TABLE (day date, indicator text, verdict boolean, evidence text, subject text, symptom text,
               report text, cause text, action text, score integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH y AS MATERIALIZED (
        SELECT s.system_id, s.time_zone, (p_day + time '00:00') AT TIME ZONE s.time_zone AS lo,
               (p_day + 1 + time '00:00') AT TIME ZONE s.time_zone AS hi
          FROM _measure.system s WHERE s.system_id = measure.system_id_of(p_system)),
    lim AS MATERIALIZED (SELECT h.indicator, h.limit_value AS v FROM _measure.health_indicator h),
    hi AS MATERIALIZED (
        SELECT i.entity, i.subject, i.item, i.hour_at, i.value, i.weight
          FROM _measure.hour_item i, y
         WHERE i.system_id = y.system_id AND i.hour_at >= y.lo AND i.hour_at < y.hi
           AND i.entity IN ('cpu', 'disc', 'line') AND i.item IN ('busy', 'qlen', 'read_busy', 'write_busy')
           AND i.value IS NOT NULL),
    -- the worst hour of an entity and item, and how many hours broke the limit
    px AS MATERIALIZED (
        SELECT x.*, l.v
          FROM (SELECT 'cpu_over_utilised' AS indicator, 'CPU ' AS label, ' % busy' AS unit, h.* FROM hi h
                 WHERE h.entity = 'cpu' AND h.item = 'busy'
                UNION ALL
                SELECT 'cpu_queuing', 'CPU ', ' queue length', h.* FROM hi h WHERE h.entity = 'cpu' AND h.item = 'qlen'
                UNION ALL
                SELECT 'disc_over_utilised', '', ' % busy', h.* FROM hi h WHERE h.entity = 'disc' AND h.item = 'busy'
                UNION ALL
                SELECT 'disc_queuing', '', ' request queue', h.* FROM hi h WHERE h.entity = 'disc' AND h.item = 'qlen'
                UNION ALL
                SELECT 'line_over_utilised', '', ' % ' || replace(h.item, '_', ' '), h.* FROM hi h
                 WHERE h.entity = 'line' AND h.item IN ('read_busy', 'write_busy')) x
          JOIN lim l ON l.indicator = x.indicator),
    pn AS (SELECT o.indicator, count(*) FILTER (WHERE o.value > o.v) AS over FROM px o GROUP BY o.indicator),
    worst AS (
        SELECT t.*, pn.over
          FROM (SELECT DISTINCT ON (x.indicator) x.indicator, x.label, x.entity, x.unit, x.subject, x.hour_at,
                       x.value, x.v
                  FROM px x
                 ORDER BY x.indicator, x.value DESC, x.hour_at, x.subject) t
          JOIN pn USING (indicator)),
    peak AS (
        SELECT w.indicator, w.value > w.v AS verdict,
               format('%s%s: %s%s at %s (limit %s); %s hour(s) above', w.label,
                      _measure.analysis_subject(w.entity, w.subject), round(w.value::numeric, 1), w.unit,
                      to_char(w.hour_at AT TIME ZONE y.time_zone, 'HH24:MI'), w.v, w.over) AS evidence,
               _measure.analysis_subject(w.entity, w.subject) AS subject
          FROM worst w, y),
    -- the day's busy per CPU (time-weighted)
    cpus AS (
        SELECT h.subject, sum(h.value * h.weight) / nullif(sum(h.weight), 0) AS busy
          FROM hi h WHERE h.entity = 'cpu' AND h.item = 'busy' GROUP BY h.subject),
    balance AS (
        SELECT 'cpu_load_balance' AS indicator,
               (max(c.busy) - min(c.busy)) > l.v AS verdict,
               format('CPU %s averaged %s %% busy, CPU %s %s %%: spread %s points (limit %s)',
                      (array_agg(c.subject ORDER BY c.busy DESC, c.subject))[1], round(max(c.busy)::numeric, 1),
                      (array_agg(c.subject ORDER BY c.busy, c.subject))[1], round(min(c.busy)::numeric, 1),
                      round((max(c.busy) - min(c.busy))::numeric, 1), l.v) AS evidence,
               (array_agg(c.subject ORDER BY c.busy DESC, c.subject))[1] AS subject
          FROM cpus c, lim l WHERE l.indicator = 'cpu_load_balance' AND c.busy IS NOT NULL
         GROUP BY l.v HAVING count(*) > 1),
    -- application processes at a high priority (their entities first: few), the busiest hour
    pe AS MATERIALIZED (
        SELECT e.entity_id, (e.ids->>'priority')::integer AS priority
          FROM _measure.entity e, y
         WHERE e.system_id = y.system_id AND e.type_code = 2
           AND (e.ids->>'priority')::integer BETWEEN 150 AND 199),
    prio AS MATERIALIZED (
        SELECT p.entity_id::text AS subject, p.hour_at, measure.busy_percent(p.busy_us, p.elapsed_us) AS busy,
               pe.priority
          FROM _measure.process_hour_best p JOIN pe ON pe.entity_id = p.entity_id, y
         WHERE p.system_id = y.system_id AND p.hour_at >= y.lo AND p.hour_at < y.hi),
    ptop AS (SELECT p.* FROM prio p ORDER BY p.busy DESC, p.hour_at, p.subject LIMIT 1),
    busyprio AS (
        SELECT 'busy_high_priority_process' AS indicator, coalesce(t.busy > l.v, false) AS verdict,
               CASE WHEN t.subject IS NULL THEN 'no application process at priority 150 to 199 was measured'
                    ELSE format('%s (priority %s): %s %% of CPU at %s (limit %s %%); %s process-hour(s) above',
                                _measure.analysis_subject('process', t.subject), t.priority, round(t.busy::numeric, 1),
                                to_char(t.hour_at AT TIME ZONE y.time_zone, 'HH24:MI'), l.v,
                                (SELECT count(*) FROM prio p WHERE p.busy > l.v)) END AS evidence,
               _measure.analysis_subject('process', t.subject) AS subject
          FROM lim l CROSS JOIN y LEFT JOIN ptop t ON true
         WHERE l.indicator = 'busy_high_priority_process'),
    -- incarnations (counter records) of processes and disc files created in the day, after the
    -- first minute of the system's data (those were there when measuring began)
    since AS MATERIALIZED (SELECT (SELECT sp.lo FROM _measure.hour_span(y.system_id) sp) + INTERVAL '1 minute' AS at FROM y),
    born AS MATERIALIZED (
        SELECT r.type_code, r.entity_id, r.record_at, min(r.first_at) AS first_at, max(r.last_at) AS last_at
          FROM _measure.record_tier r, y, since
         WHERE r.system_id = y.system_id AND r.type_code IN (2, 5) AND r.grain = 'd'
           AND r.bucket_at >= date_trunc('day', y.lo, 'UTC') AND r.bucket_at < y.hi
           AND r.record_at >= y.lo AND r.record_at < y.hi AND r.record_at > since.at
         GROUP BY r.type_code, r.entity_id, r.record_at),
    transient AS (
        SELECT 'transient_processes' AS indicator, count(b.entity_id) > l.v AS verdict,
               format('%s process(es) created lived less than 10 minutes (limit %s a day)%s', count(b.entity_id), l.v,
                      CASE WHEN count(b.entity_id) > 0 THEN '; most: ' || (SELECT x.p || ' ' || x.n FROM (
                          SELECT e.ids->>'program_file_name' AS p, count(*) AS n FROM born b JOIN _measure.entity e USING (entity_id)
                           WHERE b.type_code = 2 AND b.last_at - b.record_at < INTERVAL '10 minutes'
                           GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1) x) ELSE '' END) AS evidence,
               NULL::text AS subject
          FROM lim l LEFT JOIN born b ON b.type_code = 2 AND b.last_at - b.record_at < INTERVAL '10 minutes'
         WHERE l.indicator = 'transient_processes' GROUP BY l.v),
    trans AS MATERIALIZED (
        SELECT (SELECT sum(t.home_trans) FROM _measure.tmf_hour_best t
                 WHERE t.system_id = y.system_id AND t.hour_at >= y.lo AND t.hour_at < y.hi) AS tmf,
               sum(c.transactions) AS terminal, sum(c.disc_ios) AS disc_ios
          FROM y LEFT JOIN _measure.cpu_hour_best c ON c.system_id = y.system_id AND c.hour_at >= y.lo AND c.hour_at < y.hi
         GROUP BY y.system_id, y.lo, y.hi),
    tx AS (SELECT coalesce(nullif(trans.tmf, 0), nullif(trans.terminal, 0)) AS n,
                  CASE WHEN coalesce(trans.tmf, 0) > 0 THEN 'TMF' ELSE 'terminal' END AS source, trans.disc_ios FROM trans),
    opens AS (
        SELECT 'dynamic_file_opens' AS indicator,
               coalesce(count(b.*) >= 100 AND (tx.n IS NULL OR count(b.*) / tx.n > l.v), false) AS verdict,
               format('%s disc file(s) opened during the day%s (limit %s per transaction, at least 100)%s', count(b.*),
                      CASE WHEN tx.n IS NULL THEN ', no transactions measured'
                           ELSE format(', %s per %s transaction', round(count(b.*) / tx.n, 3), tx.source) END, l.v,
                      CASE WHEN count(b.*) > 0 THEN '; most: ' || (SELECT x.f || ' ' || x.n FROM (
                          SELECT e.ids->>'file_name' AS f, count(*) AS n FROM born b2 JOIN _measure.entity e USING (entity_id)
                           WHERE b2.type_code = 5 AND (e.ids->>'device_type')::integer = 3
                           GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1) x) ELSE '' END) AS evidence,
               NULL::text AS subject
          FROM lim l CROSS JOIN tx
          LEFT JOIN (born b JOIN _measure.entity e ON e.entity_id = b.entity_id
                     AND (e.ids->>'device_type')::integer = 3 AND strpos(e.ids->>'file_name', '#') = 0)
            ON b.type_code = 5
         WHERE l.indicator = 'dynamic_file_opens' GROUP BY l.v, tx.n, tx.source),
    ios AS (
        SELECT 'file_ios_per_transaction' AS indicator, coalesce(tx.disc_ios / tx.n > l.v, false) AS verdict,
               CASE WHEN tx.n IS NULL THEN format('%s disc I/Os, no transactions measured (limit %s per transaction)',
                                                  coalesce(tx.disc_ios, 0), l.v)
                    ELSE format('%s disc I/Os / %s %s transactions = %s per transaction (limit %s)', tx.disc_ios, tx.n,
                                tx.source, round(tx.disc_ios / tx.n, 1), l.v) END AS evidence,
               NULL::text AS subject
          FROM lim l CROSS JOIN tx WHERE l.indicator = 'file_ios_per_transaction'),
    v AS (
        SELECT p.indicator, p.verdict, p.evidence, p.subject FROM peak p
        UNION ALL SELECT b.indicator, b.verdict, b.evidence, b.subject FROM balance b
        UNION ALL SELECT b.indicator, b.verdict, b.evidence, b.subject FROM busyprio b
        UNION ALL SELECT t.indicator, t.verdict, t.evidence, t.subject FROM transient t
        UNION ALL SELECT o.indicator, o.verdict, o.evidence, o.subject FROM opens o
        UNION ALL SELECT i.indicator, i.verdict, i.evidence, i.subject FROM ios i)
    SELECT p_day, h.indicator, coalesce(v.verdict, false),
           coalesce(v.evidence, CASE h.indicator
               WHEN 'cpu_load_balance' THEN 'fewer than two CPUs measured'
               ELSE 'no ' || split_part(h.indicator, '_', 1) || ' measured' END),
           v.subject, h.symptom, h.report, h.cause, h.action,
           greatest(0, 100 - coalesce(sum(h.weight) FILTER (WHERE v.verdict) OVER (), 0))::integer
      FROM _measure.health_indicator h LEFT JOIN v ON v.indicator = h.indicator
     ORDER BY h.ord
$$;
REVOKE ALL ON FUNCTION measure.report_health_verdict(text, date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_health_verdict(text, date) TO measure_writer, measure_api, measure_reader;

-- ---------------------------------------------------------------- dashboards and alerts

-- The hourly values of one item of the given subjects (display names; NULL: all) in
-- [p_from, p_to) with their baseline and minor band (NULL where nothing was learned) and
-- severity: the exceptions dashboard's graphs.
CREATE OR REPLACE FUNCTION measure.baseline_series(p_system text, p_from timestamptz, p_to timestamptz,
                                                   p_entity text, p_item text, p_subjects text[] DEFAULT NULL)
RETURNS TABLE (hour_at timestamptz, subject text, value double precision, baseline double precision,
               band_low double precision, band_high double precision, severity smallint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT x.hour_at, x.subject, x.value, x.median, x.band_low, x.band_high, x.severity
      FROM (SELECT b.hour_at, _measure.analysis_subject(b.entity, b.subject) AS subject, b.value, b.median,
                   b.band_low, b.band_high, b.severity
              FROM _measure.hour_baseline b
             WHERE b.system_id = measure.system_id_of(p_system) AND b.hour_at >= p_from AND b.hour_at < p_to
               AND b.entity = p_entity AND b.item = p_item) x
     WHERE p_subjects IS NULL OR x.subject = ANY (p_subjects)
     ORDER BY x.hour_at, x.subject
$$;
REVOKE ALL ON FUNCTION measure.baseline_series(text, timestamptz, timestamptz, text, text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.baseline_series(text, timestamptz, timestamptz, text, text, text[])
    TO measure_writer, measure_api, measure_reader;

-- The exceptions of every system (p_system NULL) or one in [p_from, p_to): the alert rule's query.
CREATE OR REPLACE FUNCTION measure.exception_check(p_system text, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (system_name text, hour_at timestamptz, entity text, subject text, item text, severity text,
               deviation double precision)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT y.system_name, b.hour_at, b.entity, _measure.analysis_subject(b.entity, b.subject), b.item,
           CASE b.severity WHEN 2 THEN 'major' ELSE 'minor' END, b.deviation
      FROM _measure.system y
      JOIN _measure.hour_baseline b ON b.system_id = y.system_id
     WHERE (p_system IS NULL OR y.system_id = measure.system_id_of(p_system))
       AND b.hour_at >= p_from AND b.hour_at < p_to AND b.severity > 0
     ORDER BY 1, 2, 3, 4, 5
$$;
REVOKE ALL ON FUNCTION measure.exception_check(text, timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.exception_check(text, timestamptz, timestamptz)
    TO measure_writer, measure_api, measure_reader;

-- The health verdict of the last local day in [p_from, p_to) that has a condensed CPU hour:
-- the threshold dashboard's first row.
CREATE OR REPLACE FUNCTION measure.dashboard_health(p_system text, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (day date, indicator text, verdict boolean, evidence text, subject text, symptom text,
               report text, cause text, action text, score integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT v.*
      FROM (SELECT (max(h.hour_at) AT TIME ZONE y.time_zone)::date AS day
              FROM _measure.system y JOIN _measure.cpu_hour h ON h.system_id = y.system_id
             WHERE y.system_id = measure.system_id_of(p_system) AND h.hour_at >= p_from AND h.hour_at < p_to
             GROUP BY y.time_zone) d
     CROSS JOIN LATERAL measure.report_health_verdict(p_system, d.day) v
$$;
REVOKE ALL ON FUNCTION measure.dashboard_health(text, timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.dashboard_health(text, timestamptz, timestamptz)
    TO measure_writer, measure_api, measure_reader;
