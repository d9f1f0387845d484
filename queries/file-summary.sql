-- file-summary: Disc File Summary (Application Processes, Figure 6): FILE opens of disc files (DEVICE-TYPE 3),
-- names without '#', with any activity, by FILE-NAME.
--
-- Parameters: system, from_at, to_at, measurement
-- Output: file_name, open_count, reads, writes, updates, deletes, info_calls
-- Runs as measure_reader (measure.* only). Time zone: buckets are cut in the system's zone.
SELECT * FROM measure.report_file_summary(p_system => %(system)s::text, p_from => %(from_at)s::timestamptz, p_to => %(to_at)s::timestamptz,
                                          p_measurement => %(measurement)s::integer)
 ORDER BY file_name;
