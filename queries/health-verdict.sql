-- health-verdict: GPA-style indicators of one local day, each true when the problem is present,
-- with the figures that decided it, Table 1's symptom, report, cause and action, and the day's
-- score (100 - the weights of the problems present; docs/analysis.md).
--
-- Parameters: system, day (local)
-- Output: day, indicator, verdict, evidence, subject, symptom, report, cause, action, score
-- Runs as measure_reader (measure.* only).
SELECT v.day, v.indicator, v.verdict, v.evidence, v.subject, v.symptom, v.report, v.cause, v.action, v.score
  FROM measure.report_health_verdict(p_system => %(system)s::text, p_day => %(day)s::date) WITH ORDINALITY v
 ORDER BY v.ordinality;  -- the indicators' order (_measure.health_indicator.ord)
