-- cpu-trend: CPU trend report (ENFORM Figure 2): per local day, the hour with the largest average CPU queue
-- length of any CPU; DELT = max - min over the CPUs in that hour.
--
-- Parameters: system (text), date_from (date), date_to (date)
-- Output: system_name, day, loadid, cpu, cpu_type, os_version, qlen_max, qlen_delt, swap_max, busy_max, busy_delt
-- Runs as measure_reader (measure.* only). Time zone: buckets are cut in the system's zone.
SELECT * FROM measure.report_cpu_trend(p_system => %(system)s::text, p_from => %(date_from)s::date, p_to => %(date_to)s::date)
 ORDER BY day;
