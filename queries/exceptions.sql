-- exceptions: every condensed hour outside its learned baseline band (docs/analysis.md): one row per
-- hour, entity, subject and item; minor beyond 3 robust standard deviations, major beyond 5 (per
-- system: _measure.analysis_setting).
--
-- Parameters: system, from_at, to_at, severity ('minor' = all exceptions, the default; 'major')
-- Output: hour_at, local_hour, entity, subject, item, value, baseline (the median), band_low,
--   band_high (the minor band), deviation ((value - baseline) / scale), severity, direction, weeks
--   (how many earlier weeks the baseline was learned from)
-- Runs as measure_reader (measure.* only). Hours starting in [from_at, to_at).
SELECT * FROM measure.report_exceptions(p_system => %(system)s::text, p_from => %(from_at)s::timestamptz,
                                        p_to => %(to_at)s::timestamptz, p_severity => %(severity)s::text)
 ORDER BY hour_at, severity DESC, abs(deviation) DESC, entity, subject, item;
