-- discopen-summary: DISCOPEN Summary (Application Processes, Figure 7): physical opens, names without '#',
-- input + output > 0, by FILE-NAME. As ENFORM's WHERE, the condition applies to each interval record:
-- the totals are those of the records with input or output, COUNT the opens with at least one.
--
-- Parameters: system, from_at, to_at, measurement
-- Output: file_name, open_count, input_calls, cache_hits, output_calls, block_splits, stalls
-- Runs as measure_reader (measure.* only). Time zone: buckets are cut in the system's zone.
SELECT * FROM measure.report_discopen_summary(p_system => %(system)s::text, p_from => %(from_at)s::timestamptz, p_to => %(to_at)s::timestamptz,
                                              p_measurement => %(measurement)s::integer)
 ORDER BY file_name;
