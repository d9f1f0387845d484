-- shift-summary: Shift summary (ENFORM Figure 6, CPUSHFT<n>): per CPU, shift day and shift the shift-tier
-- items (QLEN-AVG-D, BUSY-MAX-D ...) with the hours that had data and the coverage.
--
-- Parameters: system (text), date_from (date), date_to (date): shift days
-- Output: cpu, shift_day, shift_no, hours, coverage_ratio, qlen_avg, qlen_max, qlen_delt, swap_avg, swap_max,
--   busy_avg, busy_max, busy_min, busy_delt, ibusy_avg, ibusy_max, sbusy_avg, sbusy_max
-- Runs as measure_reader (measure.* only). Time zone: shift days are cut in the system's zone.
SELECT * FROM measure.report_shift_summary(p_system => %(system)s::text, p_from => %(date_from)s::date, p_to => %(date_to)s::date)
 ORDER BY shift_day, shift_no, cpu;
