-- process-summary: Process Summary (Application Processes, Figure 1): per PROGRAM-FILE-NAME the processes started,
-- CPU seconds, messages received and sent, over interval records starting in [from_at, to_at).
--
-- Parameters: system (text), from_at, to_at (timestamptz), measurement (integer or NULL)
-- Output: program_file_name, process_count, cpu_seconds, messages_received, messages_sent
-- Runs as measure_reader (measure.* only). Time zone: buckets are cut in the system's zone.
SELECT * FROM measure.report_process_summary(p_system => %(system)s::text, p_from => %(from_at)s::timestamptz, p_to => %(to_at)s::timestamptz,
                                             p_measurement => %(measurement)s::integer)
 ORDER BY program_file_name;
