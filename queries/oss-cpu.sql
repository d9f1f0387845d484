-- oss-cpu: OSS CPU use (OSSCPU; its counter set is measuredb's own, the manual documents the
-- entity only): per CPU, OSS busy as a percent of the measured time, pipe-server messages and
-- OSS file-system calls per second, OSS processes at the end of the window.
--
-- Parameters: system, from_at, to_at, measurement
-- Output: cpu, intervals, oss_busy_percent, pipe_messages_per_second, oss_file_calls_per_second,
--         oss_processes_end
-- Runs as measure_reader (measure.* only). Intervals starting in [from_at, to_at).
SELECT * FROM measure.report_oss_cpu(p_system => %(system)s::text, p_from => %(from_at)s::timestamptz,
                                     p_to => %(to_at)s::timestamptz, p_measurement => %(measurement)s::integer)
 ORDER BY cpu;
