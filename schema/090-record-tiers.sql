-- 090-record-tiers: the process, file and transaction-resource reports at any range (issue 7).
--
-- The reports of "Performance Considerations for Application Processes" (process summary,
-- busy process, process activity, disc file activity, file and DISCOPEN summaries) and the
-- transaction-resource report sum every counter of every counter record over a window
-- (_measure.window_sums). Read from interval records that is O(records x counters): a month
-- of the reference node's 327 processes at 1-minute intervals is 14 million records, and the
-- records are dropped after ~35 days. These tables keep the same sums per counter record and
-- UTC hour, day and month, resolved when the hours are condensed (_measure.condense_upper,
-- both branches); _measure.window_plan cuts a window into whole months, days and hours read
-- from here and the rest (partial hours at its edges, hours not condensed yet) read from
-- interval records. Same result as the interval records, whatever the cut (tested).
--
--   _measure.record_tier   per counter record (entity_id, record_at), grain h/d/m and bucket:
--                          run time, samples, first FROM and last TO timestamp, and the sum of
--                          every counter (negative deltas counted as 0, as window_sums does).
--                          Hour rows: one per measurement, best = the entity-hour's measurement
--                          with the most measured time (ties: the lower id; the rule of the hour
--                          tiers). Day and month rows: one per measurement (best = false) and
--                          one of the best rows of their hours (measurement_id 0, best = true).
--                          Entity types: _measure.record_tier_type.
--   _measure.response_hist  per entity type giving transactions (TERMINAL, LINE, CPU), grain
--                          and bucket: the interval records with transactions, by 1 % bin of
--                          their mean response (RESPONSE-TIME / TRANSACTIONS): records,
--                          transactions, response time and the largest mean of the bin. The
--                          95 % response of the transaction-resource report comes from it.
--
-- An upgraded database: every hour that still has interval records is marked dirty below and
-- condensed again (plain branch: the collector's next _measure.condense, or
-- SELECT _measure.condense(NULL, 1000000); TimescaleDB: the tiers job). Hours whose records
-- were already dropped have no rows here: the process and file reports of those hours were
-- empty before this version too.

CREATE TABLE _measure.record_tier_type (
    entity  text PRIMARY KEY            -- _measure.entity_type.entity (loaded after this file)
);
INSERT INTO _measure.record_tier_type VALUES ('cpu'), ('process'), ('file');
GRANT SELECT ON _measure.record_tier_type TO measure_writer;

-- The counters summed (the others are NULL in counters[], read from tiers or records alike):
-- those the reports read. Summing all 37 PROCESS counters of a day of 1,856 processes took
-- 8 s of the 10 s that condensing a day may take; three take well under one. To report on
-- another counter, add its row and recondense (hours whose records are still kept).
CREATE TABLE _measure.record_tier_counter (
    entity   text NOT NULL,
    counter  text NOT NULL,
    PRIMARY KEY (entity, counter)
);
INSERT INTO _measure.record_tier_counter VALUES
    ('cpu', 'cpu_busy_time'),
    ('process', 'cpu_busy_time'), ('process', 'messages_sent'), ('process', 'messages_received'),
    ('file', 'reads'), ('file', 'writes'), ('file', 'updates_or_replies'), ('file', 'deletes_or_writereads'),
    ('file', 'info_calls'),
    ('discopen', 'driver_input_calls'), ('discopen', 'driver_output_calls'), ('discopen', 'cache_hits'),
    ('discopen', 'block_splits'), ('discopen', 'requests_blocked');
GRANT SELECT ON _measure.record_tier_counter TO measure_writer;

CREATE TABLE _measure.record_tier (
    system_id       smallint NOT NULL,
    type_code       smallint NOT NULL,
    grain           "char" NOT NULL CHECK (grain IN ('h', 'd', 'm')),
    bucket_at       timestamptz NOT NULL,   -- the UTC hour, day or month
    entity_id       bigint NOT NULL,
    record_at       timestamptz NOT NULL,
    measurement_id  integer NOT NULL,       -- 0: the best measurement of each entity-hour (d, m)
    best            boolean NOT NULL,
    cpu             smallint NOT NULL,
    first_at        timestamptz NOT NULL,   -- min FROM-TIMESTAMP of its intervals in the bucket
    last_at         timestamptz NOT NULL,   -- max TO-TIMESTAMP
    samples         integer NOT NULL,
    run_us          bigint NOT NULL,
    counters        bigint[] NOT NULL,      -- per _measure.counter_def.position: sum of max(delta, 0)
                                            -- (_measure.record_tier_counter; NULL elsewhere)
    PRIMARY KEY (system_id, type_code, grain, bucket_at, entity_id, record_at, measurement_id)
);
GRANT SELECT, INSERT, DELETE ON _measure.record_tier TO measure_writer;

CREATE TABLE _measure.response_hist (
    system_id     smallint NOT NULL,
    type_code     smallint NOT NULL,
    grain         "char" NOT NULL CHECK (grain IN ('h', 'd', 'm')),
    bucket_at     timestamptz NOT NULL,
    bin           integer NOT NULL,        -- _measure.response_bin(response, transactions)
    records       bigint NOT NULL,
    transactions  bigint NOT NULL,
    response_us   bigint NOT NULL,
    mean_max_us   numeric NOT NULL,
    PRIMARY KEY (system_id, type_code, grain, bucket_at, bin)
);
GRANT SELECT, INSERT, DELETE ON _measure.response_hist TO measure_writer;

-- DISCOPEN: ~10,000 opens on the reference node (x 24 hours x 365 days would be 90 million
-- record rows a year), read only by the DISCOPEN summary, which is by file name. So per file:
--   _measure.discopen_file_tier  per file name, grain and bucket: the sums of the interval
--                          records with DRIVER-INPUT-CALLS + DRIVER-OUTPUT-CALLS > 0 (ENFORM's
--                          WHERE applies to each record), per measurement and of the best
--                          measurement of each entity-hour (measurement_id 0);
--   _measure.discopen_open_hours  per open (counter record), UTC month and measurement (0: the
--                          best ones): bit i = hour i of the month has such an interval. An
--                          open counts once in a window if any of its hours in the window does.
CREATE TABLE _measure.discopen_file_tier (
    system_id       smallint NOT NULL,
    grain           "char" NOT NULL CHECK (grain IN ('h', 'd', 'm')),
    bucket_at       timestamptz NOT NULL,
    file_name       text NOT NULL,
    measurement_id  integer NOT NULL,
    samples         integer NOT NULL,
    counters        bigint[] NOT NULL,
    PRIMARY KEY (system_id, grain, bucket_at, file_name, measurement_id)
);
GRANT SELECT, INSERT, DELETE ON _measure.discopen_file_tier TO measure_writer;

CREATE TABLE _measure.discopen_open_hours (
    system_id       smallint NOT NULL,
    month_at        timestamptz NOT NULL,
    entity_id       bigint NOT NULL,
    record_at       timestamptz NOT NULL,
    measurement_id  integer NOT NULL,
    file_name       text NOT NULL,
    hours           bit(744) NOT NULL,
    PRIMARY KEY (system_id, month_at, entity_id, record_at, measurement_id)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.discopen_open_hours TO measure_writer;

-- What retention dropped: interval records before purged_before are gone, so no hour before
-- it is ever computed again from them (condensing such an hour, after a shift edit, say,
-- would otherwise replace its tier rows by nothing). Written by _measure.purge; here, the
-- first record still kept (the same thing for a database that purged before this version).
CREATE TABLE _measure.raw_horizon (
    only_row       boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    purged_before  timestamptz NOT NULL
);
GRANT SELECT, INSERT, UPDATE ON _measure.raw_horizon TO measure_writer;
INSERT INTO _measure.raw_horizon (purged_before)
SELECT min((SELECT min(ir.from_at) FROM _measure.interval_record ir
             WHERE ir.system_id = s.system_id AND ir.type_code = t.type_code))
  FROM _measure.system s CROSS JOIN _measure.entity_type t
HAVING min((SELECT min(ir.from_at) FROM _measure.interval_record ir
             WHERE ir.system_id = s.system_id AND ir.type_code = t.type_code)) IS NOT NULL;

-- Every hour from the first to the last interval record of each system and entity type
-- (from the (system_id, type_code, from_at) index: no scan of the records).
INSERT INTO _measure.tier_dirty (system_id, hour_at)
SELECT DISTINCT r.system_id, h
  FROM (SELECT s.system_id, t.type_code,
               (SELECT min(ir.from_at) FROM _measure.interval_record ir
                 WHERE ir.system_id = s.system_id AND ir.type_code = t.type_code) AS lo,
               (SELECT max(ir.from_at) FROM _measure.interval_record ir
                 WHERE ir.system_id = s.system_id AND ir.type_code = t.type_code) AS hi
          FROM _measure.system s CROSS JOIN _measure.entity_type t) r
 CROSS JOIN LATERAL generate_series(date_bin(INTERVAL '1 hour', r.lo, TIMESTAMPTZ '2000-01-01 00:00:00+00'),
                                    r.hi, INTERVAL '1 hour') h
 WHERE r.lo IS NOT NULL
ON CONFLICT (system_id, hour_at) DO NOTHING;
