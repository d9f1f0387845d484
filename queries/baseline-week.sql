-- baseline-week: the days against their baseline (docs/analysis.md): per entity, subject and item
-- with at least one exception, the hours judged, above and below the band, the major ones, and the
-- hour of the largest deviation with its value and baseline.
--
-- Parameters: system, date_from, date_to (local days, inclusive)
-- Output: entity, subject, item, hours, hours_above, hours_below, major_hours, largest_deviation,
--   largest_at (local), largest_value, largest_baseline, weeks_min
-- Runs as measure_reader (measure.* only).
SELECT w.entity, w.subject, w.item, w.hours, w.hours_above, w.hours_below, w.major_hours, w.largest_deviation,
       w.largest_at, w.largest_value, w.largest_baseline, w.weeks_min
  FROM measure.report_baseline_week(p_system => %(system)s::text, p_first => %(date_from)s::date,
                                    p_last => %(date_to)s::date) WITH ORDINALITY w
 ORDER BY w.ordinality;  -- entities in tier order, the largest deviation first
