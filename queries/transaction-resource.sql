-- transaction-resource: Transaction resource (ATM article, Table 4/5, Figure 6): CPU ms per transaction by component
-- (_measure.component_map), system overhead, and the lines below them in Table 4: average and 95th-percentile response time,
-- transactions per second per CPU, total CPU utilisation (the text layout prints them as Table 4 does).
--
-- Parameters: system, from_at, to_at, transaction_process (LIKE pattern of process names whose MESSAGES-RECEIVED
--   count the transactions; NULL = the terminal transactions: TERMINAL, else LINE, else CPU TRANSACTIONS)
-- Output: component, cpu_ms_per_transaction, cpu_seconds, transactions, transactions_per_second_per_cpu,
--   cpu_utilization_percent, response_seconds_avg, response_seconds_p95, response_source,
--   response_transactions_per_sample
--   Response times come from the interval records of the first of TERMINAL, LINE, CPU that counted transactions
--   (response_source): average = sum RESPONSE-TIME / sum TRANSACTIONS (exact); 95th percentile = the transaction-weighted
--   95th percentile of the records' mean responses (MEASURE keeps sums, not single responses: exact when each record
--   holds one transaction, response_transactions_per_sample = 1; pulled towards the mean as records average more).
-- Runs as measure_reader (measure.* only). Time zone: buckets are cut in the system's zone.
SELECT * FROM measure.report_transaction_resource(p_system => %(system)s::text, p_from => %(from_at)s::timestamptz, p_to => %(to_at)s::timestamptz,
                                                  p_transaction_process => %(transaction_process)s::text)
 ORDER BY component;
