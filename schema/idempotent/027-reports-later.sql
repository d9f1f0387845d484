-- Reports of the H-, J- and L-series catalogue (issue 29): the IPU balance of each CPU and the
-- top SQL statements. Neither entity type's figures are kept in tiers: both read the interval
-- records of the window (_measure.intervals), the counters by their catalogue positions
-- (_measure.counter_def), never written out here.
--
-- Intervals: those starting in [p_from, p_to). A counter record measured by several
-- measurements (a shared CPU or statement record) counts once per interval: the copy of the
-- lowest measurement id, unless p_measurement names one. A record is its entity and its
-- allocation time (record_at): two incarnations of an entity in one interval (late data of a
-- restarted CPU) both count. (Keyed by entity and start only, the copy kept was whichever the
-- engine read first, and TimescaleDB and plain PostgreSQL differed: tests/test_engines.py.)

-- The interval records of one entity type in a window, one copy of each (see above), with
-- the counters of the names asked for, in that order (NULL for a name the type lacks).
CREATE OR REPLACE FUNCTION _measure.window_counters(p_system smallint, p_entity text, p_from timestamptz,
                                                    p_to timestamptz, p_measurement integer,
                                                    p_counters text[])
RETURNS TABLE (entity_id bigint, cpu smallint, from_at timestamptz, delta_us bigint, v bigint[])
LANGUAGE sql STABLE AS $$
    WITH t AS (SELECT type_code FROM _measure.entity_type WHERE entity = p_entity),
    pos AS (SELECT array_agg(d.position ORDER BY n.o) AS p
              FROM unnest(p_counters) WITH ORDINALITY n (counter, o)
              LEFT JOIN _measure.counter_def d ON d.entity = p_entity AND d.counter = n.counter)
    SELECT DISTINCT ON (x.entity_id, x.record_at, x.from_at) x.entity_id, x.cpu, x.from_at, x.delta_us,
           ARRAY(SELECT x.c[x.i][q.p] FROM unnest(pos.p) WITH ORDINALITY q (p, o) ORDER BY q.o)
      FROM t CROSS JOIN pos
     CROSS JOIN LATERAL _measure.intervals(p_system, t.type_code, p_from, p_to) x
     WHERE x.from_at >= p_from AND x.from_at < p_to
       AND (p_measurement IS NULL OR x.measurement_id = p_measurement)
     ORDER BY x.entity_id, x.record_at, x.from_at, x.measurement_id
$$;
GRANT EXECUTE ON FUNCTION _measure.window_counters(smallint, text, timestamptz, timestamptz, integer, text[])
    TO measure_writer;

-- IPU balance: per CPU, CPU-BUSY-TIME as the 1986 reports show it (% of the interval) and
-- normalised per IPU, busy_us / (DELTA-TIME x IPUS) (measure-reference §2, the multi-IPU note:
-- inferred, to validate), and the busy % of each of its IPUs (IPU-BUSY-TIME-n / DELTA-TIME),
-- their least, greatest and spread (greatest - least, percentage points) and the busiest IPU.
-- IPUS is the greatest the CPU reported in the window (an IPU count change restarts the CPU
-- measurements, so it rarely differs); a CPU that reports no IPUS (a 1986-style record) counts
-- as one IPU and has no per-IPU figures.
CREATE OR REPLACE FUNCTION measure.report_ipu_balance(p_system text, p_from timestamptz, p_to timestamptz,
                                                      p_measurement integer DEFAULT NULL)
RETURNS TABLE (cpu smallint, ipus integer, intervals bigint, busy_percent numeric, busy_per_ipu_percent numeric,
               ipu_busy_min numeric, ipu_busy_max numeric, ipu_busy_spread numeric, busiest_ipu integer,
               ipu_busy_percent numeric[])
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH names AS (
        SELECT ARRAY['cpu_busy_time', 'ipus'] || array_agg(d.counter ORDER BY d.position) AS n
          FROM _measure.counter_def d
         WHERE d.entity = 'cpu' AND d.counter LIKE 'ipu\_busy\_time\_%'),
    r AS (
        SELECT w.cpu, w.delta_us, w.v[1] AS busy, greatest(w.v[2], 0) AS ipus, w.v[3:] AS ipu_busy
          FROM names CROSS JOIN LATERAL _measure.window_counters(measure.system_id_of(p_system), 'cpu', p_from,
                                                                 p_to, p_measurement, names.n) w),
    c AS (
        SELECT r.cpu, max(r.ipus)::integer AS ipus, count(*) AS intervals, sum(r.delta_us) AS delta_us,
               100 * sum(greatest(r.busy, 0)) / nullif(sum(r.delta_us), 0) AS busy_percent,
               100 * sum(greatest(r.busy, 0)) / nullif(sum(r.delta_us * greatest(r.ipus, 1)), 0) AS per_ipu
          FROM r GROUP BY r.cpu),
    i AS (
        SELECT r.cpu, u.k - 1 AS ipu, 100 * sum(greatest(u.b, 0)) / nullif(sum(r.delta_us), 0) AS pct
          FROM r CROSS JOIN LATERAL unnest(r.ipu_busy) WITH ORDINALITY u (b, k)
         GROUP BY r.cpu, u.k),
    b AS (
        SELECT i.cpu, min(i.pct) AS lo, max(i.pct) AS hi,
               (array_agg(i.ipu ORDER BY i.pct DESC, i.ipu))[1] AS busiest,
               array_agg(i.pct ORDER BY i.ipu) AS pcts
          FROM i JOIN c USING (cpu)
         WHERE i.ipu < c.ipus
         GROUP BY i.cpu)
    SELECT c.cpu, greatest(c.ipus, 1), c.intervals, c.busy_percent, c.per_ipu, b.lo, b.hi, b.hi - b.lo,
           b.busiest, b.pcts
      FROM c LEFT JOIN b USING (cpu)
     ORDER BY c.cpu
$$;
REVOKE ALL ON FUNCTION measure.report_ipu_balance(text, timestamptz, timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_ipu_balance(text, timestamptz, timestamptz, integer)
    TO measure_writer, measure_api, measure_reader;

-- Top SQL statements: the SQLSTMT records of the window by statement (program file, module or
-- procedure, statement index; summed over the processes that ran it), the p_top with the
-- longest elapsed time per call (ELAPSED-BUSY-TIME / CALLS; the manual's "average elapsed time
-- for each call"), ties by calls. Statements never called in the window are left out.
CREATE OR REPLACE FUNCTION measure.report_sql_statements(p_system text, p_from timestamptz, p_to timestamptz,
                                                         p_measurement integer DEFAULT NULL,
                                                         p_top integer DEFAULT 20)
RETURNS TABLE (program_file_name text, module_name text, statement_index integer, processes bigint,
               calls numeric, elapsed_seconds numeric, elapsed_ms_per_call numeric, records_accessed numeric,
               disc_reads numeric, recompiles numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH r AS (
        SELECT e.ids ->> 'program_file_name' AS program_file_name, e.ids ->> 'module_name' AS module_name,
               (e.ids ->> 'statement_index')::integer AS statement_index, w.entity_id, w.v
          FROM _measure.window_counters(measure.system_id_of(p_system), 'sqlstmt', p_from, p_to, p_measurement,
                                        ARRAY['calls', 'elapsed_busy_time', 'records_accessed', 'disc_reads',
                                              'recompiles']) w
          JOIN _measure.entity e ON e.entity_id = w.entity_id),
    s AS (
        SELECT r.program_file_name, r.module_name, r.statement_index, count(DISTINCT r.entity_id) AS processes,
               sum(greatest(r.v[1], 0)) AS calls, sum(greatest(r.v[2], 0)) AS elapsed_us,
               sum(greatest(r.v[3], 0)) AS records_accessed, sum(greatest(r.v[4], 0)) AS disc_reads,
               sum(greatest(r.v[5], 0)) AS recompiles
          FROM r GROUP BY 1, 2, 3)
    SELECT s.program_file_name, s.module_name, s.statement_index, s.processes, s.calls, s.elapsed_us / 1e6,
           s.elapsed_us / s.calls / 1e3, s.records_accessed, s.disc_reads, s.recompiles
      FROM s
     WHERE s.calls > 0
     ORDER BY s.elapsed_us / s.calls DESC, s.calls DESC, 1, 2, 3
     LIMIT greatest(p_top, 0)
$$;
REVOKE ALL ON FUNCTION measure.report_sql_statements(text, timestamptz, timestamptz, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_sql_statements(text, timestamptz, timestamptz, integer, integer)
    TO measure_writer, measure_api, measure_reader;

-- DISKFILE activity, beside the FILE and DISCOPEN reports: per disc file (volume, file name;
-- all its opens at the disc process together, summed over the window's intervals), the
-- requests, physical reads and writes, cache read hits, requests that waited on locks, the lock
-- wait time and the longest single wait (MAX-LOCKWAIT-TIME, a max value: the greatest of the
-- window's), block splits and SQL row changes; busiest (most requests) first.
CREATE OR REPLACE FUNCTION measure.report_diskfile_activity(p_system text, p_from timestamptz, p_to timestamptz,
                                                            p_measurement integer DEFAULT NULL)
RETURNS TABLE (device_name text, file_name text, requests numeric, driver_input_calls numeric,
               driver_output_calls numeric, cache_read_hits numeric, requests_blocked numeric,
               lockwait_seconds numeric, max_lockwait_ms numeric, block_splits numeric, sql_row_changes numeric)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.ids ->> 'device_name', e.ids ->> 'file_name', sum(greatest(w.v[1], 0)), sum(greatest(w.v[2], 0)),
           sum(greatest(w.v[3], 0)), sum(greatest(w.v[4], 0)), sum(greatest(w.v[5], 0)),
           sum(greatest(w.v[6], 0)) / 1e6, max(w.v[7]) / 1e3::numeric, sum(greatest(w.v[8], 0)),
           sum(greatest(w.v[9], 0) + greatest(w.v[10], 0) + greatest(w.v[11], 0))
      FROM _measure.window_counters(measure.system_id_of(p_system), 'diskfile', p_from, p_to, p_measurement,
                                    ARRAY['requests', 'driver_input_calls', 'driver_output_calls', 'cache_read_hits',
                                          'requests_blocked', 'lockwait_time', 'max_lockwait_time', 'block_splits',
                                          'sql_inserts', 'sql_updates', 'sql_deletes']) w
      JOIN _measure.entity e ON e.entity_id = w.entity_id
     GROUP BY 1, 2
     ORDER BY 3 DESC, 1, 2
$$;
REVOKE ALL ON FUNCTION measure.report_diskfile_activity(text, timestamptz, timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_diskfile_activity(text, timestamptz, timestamptz, integer)
    TO measure_writer, measure_api, measure_reader;

-- OSS CPU use: per CPU, OSS-BUSY-TIME as % of the window's measured time, OSS pipe-server
-- messages and OSS file-system calls per second, and the OSS processes at the end of the
-- window (OSS-PROCESSES-END of its last interval). OSSCPU's counter set is measuredb's own
-- (schema/catalog/counters.csv, confidence unknown): the manual documents the entity only.
CREATE OR REPLACE FUNCTION measure.report_oss_cpu(p_system text, p_from timestamptz, p_to timestamptz,
                                                  p_measurement integer DEFAULT NULL)
RETURNS TABLE (cpu smallint, intervals bigint, oss_busy_percent numeric, pipe_messages_per_second numeric,
               oss_file_calls_per_second numeric, oss_processes_end bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT w.cpu, count(*), 100 * sum(greatest(w.v[1], 0)) / nullif(sum(w.delta_us), 0),
           1e6 * sum(greatest(w.v[2], 0)) / nullif(sum(w.delta_us), 0),
           1e6 * sum(greatest(w.v[3], 0)) / nullif(sum(w.delta_us), 0),
           (array_agg(w.v[4] ORDER BY w.from_at DESC))[1]
      FROM _measure.window_counters(measure.system_id_of(p_system), 'osscpu', p_from, p_to, p_measurement,
                                    ARRAY['oss_busy_time', 'pipe_messages', 'oss_file_calls',
                                          'oss_processes_end']) w
     GROUP BY w.cpu
     ORDER BY w.cpu
$$;
REVOKE ALL ON FUNCTION measure.report_oss_cpu(text, timestamptz, timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.report_oss_cpu(text, timestamptz, timestamptz, integer)
    TO measure_writer, measure_api, measure_reader;
