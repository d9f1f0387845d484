-- diskfile-activity: DISKFILE activity (H-, J- and L-series), beside file-summary and
-- discopen-summary: per disc file (all its opens at the disc process), requests, physical
-- reads and writes, cache read hits, lock waits, the longest single lock wait, block splits
-- and SQL row changes; most requests first.
--
-- Parameters: system, from_at, to_at, measurement
-- Output: device_name, file_name, requests, driver_input_calls, driver_output_calls, cache_read_hits,
--         requests_blocked, lockwait_seconds, max_lockwait_ms, block_splits, sql_row_changes
-- Runs as measure_reader (measure.* only). Intervals starting in [from_at, to_at).
SELECT * FROM measure.report_diskfile_activity(p_system => %(system)s::text, p_from => %(from_at)s::timestamptz,
                                               p_to => %(to_at)s::timestamptz,
                                               p_measurement => %(measurement)s::integer)
 ORDER BY requests DESC, device_name, file_name;
