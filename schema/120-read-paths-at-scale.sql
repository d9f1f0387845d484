-- 120-read-paths-at-scale: two indexes for reads that a week of a 16-CPU node made slow
-- (issue 14, item 6; bench/bench_reads.py).
--
--   terminal_hour_entity_idx   the hours of a few terminals (the dashboard's slowest
--       terminals, measure.terminal_series with top) by terminal and hour, instead of
--       filtering every terminal of every hour of the range (a week of 1,600 terminals:
--       268,800 rows read for 840).
--   interval_run_type_idx      the condensation check counts the entities measured per hour
--       of a day for six entity types; TERMINAL and DISCOPEN runs are 93 % of a day's runs
--       (360,000 of them on ref16), which a scan of the day filtered row by row. An index-only
--       scan of the six types reads the rest (a day's partition: 360,000 entries, ~15 MB).

CREATE INDEX IF NOT EXISTS terminal_hour_entity_idx ON _measure.terminal_hour (system_id, entity_id, hour_at);

CREATE INDEX IF NOT EXISTS interval_run_type_idx ON _measure.interval_run (system_id, type_code, from_at, entity_id);
