-- capacity-forecast: Capacity forecast (Capacity Planning Concepts): per CPU and disc volume the daily peak-hour
-- busy percent, its trend, the date it crosses available capacity (default 70 percent) with the +-15 percent band,
-- and for CPUs the peak if another CPU halted (its load spread evenly over the others).
--
-- Parameters: system, date_from, date_to (date), capacity (numeric, percent, 70)
-- Output: entity, subject, days, peak_busy_first, peak_busy_last, slope_per_day, crossing_date,
--   crossing_early, crossing_late, month_peak, busy_if_one_halted
-- Runs as measure_reader (measure.* only). Time zone: buckets are cut in the system's zone.
SELECT * FROM measure.report_capacity_forecast(p_system => %(system)s::text, p_from => %(date_from)s::date,
                                               p_to => %(date_to)s::date, p_capacity => %(capacity)s::numeric)
 ORDER BY entity, subject;
