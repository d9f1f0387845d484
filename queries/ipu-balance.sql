-- ipu-balance: IPU balance of each CPU (H-, J- and L-series multi-core CPUs): CPU busy as the
-- 1986 reports show it and normalised per IPU (busy / (DELTA-TIME x IPUS), measure-reference §2,
-- inferred), each IPU's busy percent, their least, greatest and spread, and the busiest IPU.
--
-- Parameters: system, from_at, to_at, measurement
-- Output: cpu, ipus, intervals, busy_percent, busy_per_ipu_percent, ipu_busy_min, ipu_busy_max,
--         ipu_busy_spread, busiest_ipu, ipu_busy_percent (one per IPU, IPU 0 first)
-- Runs as measure_reader (measure.* only). Intervals starting in [from_at, to_at).
SELECT * FROM measure.report_ipu_balance(p_system => %(system)s::text, p_from => %(from_at)s::timestamptz,
                                         p_to => %(to_at)s::timestamptz, p_measurement => %(measurement)s::integer)
 ORDER BY cpu;
