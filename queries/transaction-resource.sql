-- transaction-resource: Transaction resource (ATM article, Table 4/5, Figure 6): CPU ms per transaction by component
-- (_measure.component_map), system overhead, transactions per second per CPU, CPU utilisation.
--
-- Parameters: system, from_at, to_at, transaction_process (LIKE pattern of process names whose MESSAGES-RECEIVED
--   count the transactions; NULL = LINE TRANSACTIONS)
-- Output: component, cpu_ms_per_transaction, cpu_seconds, transactions, transactions_per_second_per_cpu,
--   cpu_utilization_percent, response_seconds_avg
-- Runs as measure_reader (measure.* only). Time zone: buckets are cut in the system's zone.
SELECT * FROM measure.report_transaction_resource(p_system => %(system)s, p_from => %(from_at)s, p_to => %(to_at)s,
                                                  p_transaction_process => %(transaction_process)s)
 ORDER BY component;
