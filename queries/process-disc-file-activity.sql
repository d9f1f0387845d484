-- process-disc-file-activity: Process Disc File Activity (Application Processes, Figure 5): the disc FILE opens
-- (DEVICE-TYPE 3) of the processes in one CPU (and PIN), with the process header columns.
--
-- Parameters: system, from_at, to_at, cpu (integer), pin (integer or NULL)
-- Output: process_name, cpu, pin, program_file_name, from_at, to_at, cpu_busy_seconds, messages_sent,
--   messages_received, file_name, reads, writes, deletes_or_writereads, info_calls
-- Runs as measure_reader (measure.* only). Time zone: buckets are cut in the system's zone.
SELECT * FROM measure.report_process_disc_file_activity(p_system => %(system)s::text, p_from => %(from_at)s::timestamptz,
                                                        p_to => %(to_at)s::timestamptz, p_cpu => %(cpu)s::integer, p_pin => %(pin)s::integer)
 ORDER BY cpu, pin, from_at, file_name;
