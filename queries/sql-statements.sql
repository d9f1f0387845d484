-- sql-statements: the top SQL statements (SQLSTMT) by elapsed time per call (ELAPSED-BUSY-TIME /
-- CALLS), ties by calls; per statement (program file, module, statement index) summed over the
-- processes that ran it.
--
-- Parameters: system, from_at, to_at, measurement, top
-- Output: program_file_name, module_name, statement_index, processes, calls, elapsed_seconds,
--         elapsed_ms_per_call, records_accessed, disc_reads, recompiles
-- Runs as measure_reader (measure.* only). Intervals starting in [from_at, to_at).
SELECT * FROM measure.report_sql_statements(p_system => %(system)s::text, p_from => %(from_at)s::timestamptz,
                                            p_to => %(to_at)s::timestamptz, p_measurement => %(measurement)s::integer,
                                            p_top => %(top)s::integer)
 ORDER BY elapsed_ms_per_call DESC, calls DESC, program_file_name, module_name, statement_index;
