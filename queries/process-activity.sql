-- process-activity: Process Activity (Application Processes, Figure 3): CPU per transaction, I/O per transaction and
-- CPU per I/O of processes that received and sent messages, by CPU-BUSY-TIME descending.
--
-- Parameters: system, from_at, to_at, measurement
-- Output: program_file_name, process_name, cpu, pin, cpu_seconds_per_trans, io_per_trans, cpu_seconds_per_io
-- Runs as measure_reader (measure.* only). Time zone: buckets are cut in the system's zone.
SELECT a.program_file_name, a.process_name, a.cpu, a.pin, a.cpu_seconds_per_trans, a.io_per_trans,
       a.cpu_seconds_per_io
  FROM measure.report_process_activity(p_system => %(system)s::text, p_from => %(from_at)s::timestamptz, p_to => %(to_at)s::timestamptz,
                                       p_measurement => %(measurement)s::integer) WITH ORDINALITY AS a
 ORDER BY a.ordinality;
