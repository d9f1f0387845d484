-- condensation-check: Condensation check (the 1986 routine checked that the nightly loads had run before it
-- purged the weekly subvolume): the hours of one local day whose tiers are missing or incomplete.
--
-- Parameters: system (text), day (date: the local day)
-- Output: hour_at, time_of_day, loadid, shift_day, shift_no, measured, condensed, coverage_min, pending,
--   shift_tier, month_tier, problems
-- Runs as measure_reader (measure.* only). Time zone: the day's 23, 24 or 25 hours in the system's zone.
SELECT * FROM measure.report_condensation_check(p_system => %(system)s::text, p_day => %(day)s::date)
 ORDER BY hour_at;
