-- busy-process: Busy Process (Application Processes, Figure 2): processes above min_cpu_seconds of CPU at a
-- priority below max_priority, by CPU-BUSY-TIME descending.
--
-- Parameters: system, from_at, to_at, min_cpu_seconds (numeric, 600 in the figure), max_priority (200), measurement
-- Output: program_file_name, process_name, cpu, pin, run_seconds, cpu_seconds, cpu_utilization_ratio, io_per_second, priority
-- Runs as measure_reader (measure.* only). Time zone: buckets are cut in the system's zone.
SELECT * FROM measure.report_busy_process(p_system => %(system)s::text, p_from => %(from_at)s::timestamptz, p_to => %(to_at)s::timestamptz,
                                          p_min_cpu_seconds => %(min_cpu_seconds)s::numeric,
                                          p_max_priority => %(max_priority)s::integer, p_measurement => %(measurement)s::integer)
 ORDER BY cpu_seconds DESC, program_file_name, process_name;
