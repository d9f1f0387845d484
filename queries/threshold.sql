-- threshold: Threshold report (ENFORM Figure 9, printed as Figure 1): the CPU-hours of one shift day that break
-- at least one threshold of measure.threshold (defaults qlen-max > 2, qlen-delt > 1, swap-max > 2,
-- busy-max > 70, busy-delt > 20, ibusy-max > 25).
--
-- Parameters: system (text), day (date: the shift day, local), shift (integer or NULL = all shifts)
-- Output: cpu, time_of_day, hour_at, shift_no, qlen_max, qlen_delt, swap_max, busy_max, busy_delt, ibusy_max,
--   qlen_avg, swap_avg, busy_avg, ibusy_avg, os_version, broken
-- Runs as measure_reader (measure.* only). Time zone: buckets are cut in the system's zone.
SELECT * FROM measure.report_threshold(p_system => %(system)s::text, p_day => %(day)s::date, p_shift => %(shift)s::integer)
 ORDER BY cpu, hour_at;
