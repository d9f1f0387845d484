-- 055-import: interval records from outside the simulated node (`measuredb import`,
-- POST /import; core/importer.py) and their export (`measuredb export`, GET /export;
-- core/exporter.py).
--
-- An import is one transaction:
--   _measure.import_begin()            the staging tables (pg_temp._import_in, _import_run …;
--                                      dropped at commit)
--   runs into pg_temp._import_run      by binary COPY (the CLI, as the schema owner: the rows
--                                      encoded as runs by core/importer.py _RunStager), or rows
--                                      into pg_temp._import_in by measure.import_stage(...)
--                                      (the API: SECURITY DEFINER)
--   _measure.import_store(max, check)  stores the runs as they are when nothing needs a closer
--                                      look (_measure.import_store_runs: a first import), else
--                                      checks the staged rows against each other and against
--                                      what is stored, then stores them (below); raises SQLSTATE
--                                      22023 with the bad rows as JSON in DETAIL, so a bad file
--                                      stores nothing
--   _measure.condense(...)             the hours written, as the collector's slices do
--
-- Decisions (README, "Bring your own data"):
--   * identity: an interval is (measurement, entity, FROM-TIMESTAMP). A staged interval equal
--     to a stored one (DELTA-TIME, CPU, ERROR and every counter) is skipped: importing a file
--     again changes nothing. One that differs, or overlaps a stored interval of the same
--     counter record without starting with it, is a bad row: stored data is never overwritten
--     (delete it through measure.interval_record first to replace it).
--   * measurement: the rows go to the system's measurement of the given name (the MEASUREMENT
--     column, else IMPORT), the lowest id of that name; missing, it is created as a stopped
--     measurement without start time, which the collector never runs (new ones in the order
--     the file first names them).
--   * counter records: the allocation time of an imported record (record_at) is unknown; it
--     is stored as 1970-01-01 00:00 UTC, so every import of an entity continues one record.
--   * entities: found by (system, type, key); new ones get the collector's 63-bit id
--     (collector/sink.py entity_id_for), so a node measured later meets the same entity.
--   * USERDEF: a TYPE column (ACCUM, FACCUM, BUSY, QUEUE, QBUSY) adds the counter to the
--     measurement's CONTAB (what measure.userdef_* read the unit from); a TYPE that contradicts
--     the CONTAB is a bad row.

-- ---------------------------------------------------------------- time as text

-- A timestamp as ISO 8601 text: 2026-03-01T08:00:00, with .ffffff only when not whole seconds
-- (the form Python's datetime.fromisoformat reads). Independent of DateStyle and TimeZone.
CREATE OR REPLACE FUNCTION measure.iso_timestamp(p_at timestamp)
RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN to_char(p_at, 'YYYY-MM-DD"T"HH24:MI:SS')
       || CASE WHEN date_trunc('second', p_at) = p_at THEN '' ELSE '.' || to_char(p_at, 'US') END;
GRANT EXECUTE ON FUNCTION measure.iso_timestamp(timestamp) TO measure_writer, measure_api, measure_reader;

-- An instant as ISO 8601 local time of a zone with its UTC offset: 2026-03-01T08:00:00-05:00
-- (MEASURE's local civil time, unambiguous across a DST change). One expression, so that the
-- planner inlines it: as a function with a subquery it was called once per value, 80 % of the
-- time of an export (2 × 614,640 calls for an hour of ref16 DISCOPEN: 33 s of 40).
-- (Not STRICT, and no call of measure.iso_timestamp: a STRICT function whose body has a CASE,
-- or an IMMUTABLE one calling the STABLE to_char, is never inlined. NULL in, NULL out still.)
CREATE OR REPLACE FUNCTION measure.local_iso(p_at timestamptz, p_zone text)
RETURNS text LANGUAGE sql STABLE PARALLEL SAFE
RETURN to_char(p_at AT TIME ZONE p_zone, 'YYYY-MM-DD"T"HH24:MI:SS')
       || CASE WHEN date_trunc('second', p_at) = p_at THEN '' ELSE '.' || to_char(p_at, 'US') END
       || CASE WHEN (p_at AT TIME ZONE p_zone) < (p_at AT TIME ZONE 'UTC') THEN '-' ELSE '+' END
       || to_char(abs(extract(epoch FROM (p_at AT TIME ZONE p_zone) - (p_at AT TIME ZONE 'UTC'))::integer)
                  * INTERVAL '1 second', 'HH24:MI');
GRANT EXECUTE ON FUNCTION measure.local_iso(timestamptz, text) TO measure_writer, measure_api, measure_reader;

-- ---------------------------------------------------------------- staging

-- The staging table of one import (times as Unix microseconds, counters in catalogue order).
CREATE OR REPLACE FUNCTION _measure.import_begin()
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('pg_temp._import_in') IS NULL THEN
        CREATE TEMP TABLE _import_in (
            line         bigint NOT NULL,     -- where the row is in the file (for the report)
            system_id    smallint NOT NULL,
            measurement  text NOT NULL,       -- the measurement's name
            type_code    smallint NOT NULL,
            entity_id    bigint NOT NULL,     -- collector/sink.py entity_id_for(system, type, key)
            key          text NOT NULL,
            ids          jsonb NOT NULL,
            cpu          smallint NOT NULL,   -- -1: none
            from_us      bigint NOT NULL,
            to_us        bigint NOT NULL,
            delta_us     bigint NOT NULL,
            error        smallint NOT NULL,
            user_type    text,                -- USERDEF TYPE, if the file gives it
            counters     bigint[] NOT NULL
        ) ON COMMIT DROP;
    ELSE
        TRUNCATE pg_temp._import_in;
    END IF;
    -- or the same rows as runs (the CLI: core/importer.py _RunStager), the lines of each run's
    -- intervals beside its counters, with their entities and measurements (meas: a number)
    IF to_regclass('pg_temp._import_run') IS NULL THEN
        CREATE TEMP TABLE _import_run (
            system_id    smallint NOT NULL,
            type_code    smallint NOT NULL,
            meas         smallint NOT NULL,   -- pg_temp._import_names.meas
            entity_id    bigint NOT NULL,
            from_at      timestamptz NOT NULL,
            delta_us     bigint NOT NULL,
            n            smallint NOT NULL,
            cpu          smallint NOT NULL,   -- -1: none
            error        smallint NOT NULL,
            counters     bigint[] NOT NULL,   -- [interval][counter]
            nonzero      bigint,
            lines        bigint[] NOT NULL    -- [interval]
        ) ON COMMIT DROP;
        CREATE TEMP TABLE _import_entity (entity_id bigint NOT NULL, system_id smallint NOT NULL,
                                          type_code smallint NOT NULL, key text NOT NULL, ids jsonb NOT NULL)
            ON COMMIT DROP;
        CREATE TEMP TABLE _import_names (meas smallint NOT NULL, system_id smallint NOT NULL, name text NOT NULL,
                                         first_line bigint NOT NULL) ON COMMIT DROP;
    ELSE
        TRUNCATE pg_temp._import_run, pg_temp._import_entity, pg_temp._import_names;
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.import_begin() TO measure_writer;

-- ---------------------------------------------------------------- checking and storing

-- The measurements of pg_temp._import_meas (system_id, name, first_line, measurement_id,
-- created) without an id yet: new stopped ones, in the order the file names them first (an
-- export lists its rows by time).
CREATE OR REPLACE FUNCTION _measure.import_new_measurements()
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_id integer;
    v_r record;
BEGIN
    FOR v_r IN SELECT system_id, name FROM pg_temp._import_meas WHERE measurement_id IS NULL
                ORDER BY first_line LOOP
        INSERT INTO _measure.measurement (system_id, name, contab, source, state, state_detail)
        VALUES (v_r.system_id, v_r.name, '{"descriptors": [], "counters": []}',
                'measuredb import: interval records loaded from a file', 'stopped',
                'imported interval records (never run by the collector)')
        RETURNING measurement_id INTO v_id;
        UPDATE pg_temp._import_meas SET measurement_id = v_id, created = true
         WHERE system_id = v_r.system_id AND name = v_r.name;
    END LOOP;
END
$$;
GRANT EXECUTE ON FUNCTION _measure.import_new_measurements() TO measure_writer;

-- The runs staged in pg_temp._import_run, stored as they are when nothing needs a closer
-- look: no two runs of one counter record overlap (a row repeated in the file is such an
-- overlap), no entity is stored under another id, no USERDEF TYPE, and no interval of those
-- counter records is stored around the file's range (re-importing, or data from elsewhere).
-- Then the work is set operations on runs (about 60 intervals each): no row is unpacked,
-- sorted or compared. Otherwise the runs are unpacked into pg_temp._import_in (every
-- interval with its line) for the checks of _measure.import_store, and NULL is returned.
-- Either way the result is the same: the intervals stored as runs by the collector's rule,
-- the same entities, measurements and hours.
CREATE OR REPLACE FUNCTION _measure.import_store_runs(p_check_only boolean)
RETURNS jsonb LANGUAGE plpgsql SET work_mem = '256MB' AS $$
DECLARE
    v_type smallint;
    v_rows bigint;
    v_hours bigint;
    v_lo timestamptz;
    v_hi timestamptz;
    v_last timestamptz;
    v_slack interval;
    v_systems smallint[];
    v_meas jsonb;
    v_simple boolean;
BEGIN
    IF to_regclass('pg_temp._import_run') IS NULL OR NOT EXISTS (SELECT 1 FROM pg_temp._import_run) THEN
        RETURN NULL;
    END IF;
    ANALYZE pg_temp._import_run;
    ANALYZE pg_temp._import_entity;
    ANALYZE pg_temp._import_names;
    SELECT min(type_code), sum(n), min(from_at), max(from_at + n * delta_us * INTERVAL '1 microsecond'),
           max(from_at + (n - 1) * delta_us * INTERVAL '1 microsecond'), array_agg(DISTINCT system_id),
           greatest(max(delta_us) * INTERVAL '1 microsecond', INTERVAL '1 day')
      INTO v_type, v_rows, v_lo, v_hi, v_last, v_systems, v_slack FROM pg_temp._import_run;
    IF to_regclass('pg_temp._import_meas') IS NOT NULL THEN DROP TABLE pg_temp._import_meas; END IF;
    CREATE TEMP TABLE _import_meas ON COMMIT DROP AS
    SELECT x.system_id, x.name, x.first_line, x.meas,
           (SELECT min(m.measurement_id) FROM _measure.measurement m
             WHERE m.system_id = x.system_id AND upper(m.name) = x.name) AS measurement_id,
           false AS created
      FROM (SELECT system_id, upper(name) AS name, min(first_line) AS first_line, min(meas) AS meas
              FROM pg_temp._import_names GROUP BY 1, 2) x;
    v_simple := NOT EXISTS (  -- two numbers of one measurement (the client gives one a name)
                    SELECT 1 FROM pg_temp._import_names GROUP BY system_id, upper(name) HAVING count(*) > 1)
        AND NOT EXISTS (  -- an entity stored under another id
                    SELECT 1 FROM pg_temp._import_entity i
                      JOIN _measure.entity e ON e.system_id = i.system_id AND e.type_code = i.type_code
                                            AND e.key = i.key AND e.entity_id <> i.entity_id)
        AND NOT EXISTS (  -- runs of one counter record that overlap
                    SELECT 1 FROM (SELECT r.from_at, lag(r.from_at + r.n * r.delta_us * INTERVAL '1 microsecond')
                                                         OVER w AS p_to
                                     FROM pg_temp._import_run r
                                   WINDOW w AS (PARTITION BY r.system_id, r.meas, r.entity_id ORDER BY r.from_at)) x
                     WHERE x.p_to > x.from_at)
        AND NOT EXISTS (  -- stored intervals of those counter records around the file's range
                    SELECT 1 FROM _measure.interval_run r
                      JOIN (SELECT DISTINCT m.measurement_id, i.entity_id
                              FROM pg_temp._import_run i JOIN pg_temp._import_meas m ON m.meas = i.meas
                             WHERE m.measurement_id IS NOT NULL) p
                        ON p.measurement_id = r.measurement_id AND p.entity_id = r.entity_id
                     WHERE r.system_id = ANY (v_systems) AND r.type_code = v_type
                       AND r.from_at >= _measure.hour_of(v_lo) - v_slack AND r.from_at < v_hi);
    IF NOT v_simple THEN
        DROP TABLE pg_temp._import_meas;
        INSERT INTO pg_temp._import_in (line, system_id, measurement, type_code, entity_id, key, ids, cpu,
                                        from_us, to_us, delta_us, error, user_type, counters)
        SELECT r.lines[g.i], r.system_id, nm.name, r.type_code, r.entity_id, e.key, e.ids, r.cpu,
               _measure.timestamptz_to_us(r.from_at) + (g.i - 1) * r.delta_us,
               _measure.timestamptz_to_us(r.from_at) + g.i * r.delta_us, r.delta_us, r.error, NULL,
               ARRAY(SELECT x FROM unnest(d.c[g.i:g.i][:]) x)
          FROM pg_temp._import_run r
          JOIN pg_temp._import_names nm ON nm.meas = r.meas
          JOIN pg_temp._import_entity e ON e.entity_id = r.entity_id
         CROSS JOIN LATERAL (SELECT r.counters || '{}'::bigint[] AS c OFFSET 0) d
         CROSS JOIN LATERAL generate_series(1, r.n) g (i);
        TRUNCATE pg_temp._import_run, pg_temp._import_entity, pg_temp._import_names;
        RETURN NULL;
    END IF;
    -- a run of an hour the client sent in pieces (more rows than it holds at once): one run,
    -- as the collector's rule makes it (unless that would pass a run's 32,767 intervals)
    IF EXISTS (SELECT 1 FROM pg_temp._import_run
                GROUP BY system_id, meas, entity_id, _measure.hour_of(from_at) HAVING count(*) > 1) THEN
        CREATE TEMP TABLE _import_run_joined ON COMMIT DROP AS
        WITH x AS (
            SELECT r.*, (lag(r.from_at + r.n * r.delta_us * INTERVAL '1 microsecond') OVER w IS DISTINCT FROM r.from_at
                         OR lag(r.delta_us) OVER w <> r.delta_us OR lag(r.cpu) OVER w <> r.cpu
                         OR lag(r.error) OVER w <> r.error
                         OR _measure.hour_of(lag(r.from_at) OVER w) <> _measure.hour_of(r.from_at)) AS brk
              FROM pg_temp._import_run r
            WINDOW w AS (PARTITION BY r.system_id, r.meas, r.entity_id ORDER BY r.from_at)),
        g AS (
            SELECT x.*, count(*) FILTER (WHERE x.brk) OVER (PARTITION BY x.system_id, x.meas, x.entity_id
                                                            ORDER BY x.from_at) AS grp
              FROM x)
        SELECT g.system_id, min(g.type_code) AS type_code, g.meas, g.entity_id, min(g.from_at) AS from_at,
               min(g.delta_us) AS delta_us, sum(g.n) AS n, min(g.cpu) AS cpu, min(g.error) AS error,
               _measure.array_cat_agg(g.counters ORDER BY g.from_at) AS counters,
               CASE WHEN count(g.nonzero) = count(*) THEN bit_or(g.nonzero) END AS nonzero,
               _measure.array_cat_agg(g.lines ORDER BY g.from_at) AS lines
          FROM g
         GROUP BY g.system_id, g.meas, g.entity_id, g.grp;
        IF NOT EXISTS (SELECT 1 FROM pg_temp._import_run_joined WHERE n > 32767) THEN
            TRUNCATE pg_temp._import_run;
            INSERT INTO pg_temp._import_run (system_id, type_code, meas, entity_id, from_at, delta_us, n, cpu, error,
                                             counters, nonzero, lines)
            SELECT system_id, type_code, meas, entity_id, from_at, delta_us, n, cpu, error, counters, nonzero, lines
              FROM pg_temp._import_run_joined;
        END IF;
        DROP TABLE pg_temp._import_run_joined;
    END IF;
    PERFORM _measure.import_new_measurements();
    SELECT coalesce(jsonb_agg(jsonb_build_object('system_id', system_id, 'name', name,
                                                 'measurement_id', measurement_id, 'created', created)
                              ORDER BY system_id, name), '[]')
      INTO v_meas FROM pg_temp._import_meas;
    IF p_check_only THEN
        RETURN jsonb_build_object('rows', v_rows, 'stored', 0, 'unchanged', 0, 'duplicates', 0, 'hours', 0,
                                  'measurements', v_meas, 'systems', to_jsonb(v_systems));
    END IF;
    -- new entities (when each was first seen in the file, with the CPU of that interval)
    INSERT INTO _measure.entity (entity_id, system_id, type_code, key, ids, cpu, first_seen_at)
    SELECT e.entity_id, e.system_id, e.type_code, e.key, e.ids, CASE WHEN f.cpu >= 0 THEN f.cpu END, f.from_at
      FROM pg_temp._import_entity e
      JOIN (SELECT DISTINCT ON (entity_id) entity_id, cpu, from_at FROM pg_temp._import_run
             ORDER BY entity_id, from_at) f ON f.entity_id = e.entity_id
     ORDER BY e.entity_id
    ON CONFLICT DO NOTHING;
    -- the hours written (condensed by measure.import_condense after the last file)
    IF to_regclass('pg_temp._import_hours') IS NULL THEN
        CREATE TEMP TABLE _import_hours (system_id smallint, hour_at timestamptz) ON COMMIT DROP;
    END IF;
    CREATE TEMP TABLE _import_run_hours ON COMMIT DROP AS
    SELECT DISTINCT system_id, _measure.hour_of(from_at) AS hour_at FROM pg_temp._import_run;
    SELECT count(*) INTO v_hours FROM pg_temp._import_run_hours;
    INSERT INTO pg_temp._import_hours
    SELECT system_id, hour_at FROM pg_temp._import_run_hours
    EXCEPT SELECT system_id, hour_at FROM pg_temp._import_hours;
    -- the runs, as the collector's writer stores them (imported: record_at 1970, each interval
    -- closed by an interval copy)
    PERFORM _measure.run_partitions_for(v_lo, v_last);
    INSERT INTO _measure.interval_run (system_id, type_code, measurement_id, entity_id, record_at, from_at,
                                       delta_us, n, closing_kind, cpu, error, counters, nonzero)
    SELECT r.system_id, r.type_code, m.measurement_id, r.entity_id, TIMESTAMPTZ '1970-01-01 00:00:00+00',
           r.from_at, r.delta_us, r.n, 3, r.cpu, r.error, r.counters, r.nonzero
      FROM pg_temp._import_run r JOIN pg_temp._import_meas m ON m.meas = r.meas;
    PERFORM _measure.note_intervals(x.system_id, x.lo, x.hi)
       FROM (SELECT system_id, min(from_at) AS lo, max(from_at + (n - 1) * delta_us * INTERVAL '1 microsecond') AS hi
               FROM pg_temp._import_run GROUP BY 1) x;
    INSERT INTO _measure.pack_todo (hour_at)
    SELECT DISTINCT hour_at FROM pg_temp._import_run_hours
    ON CONFLICT (hour_at) DO UPDATE SET noted_at = now();
    DROP TABLE pg_temp._import_run_hours;
    TRUNCATE pg_temp._import_run, pg_temp._import_entity, pg_temp._import_names;
    RETURN jsonb_build_object('rows', v_rows, 'stored', v_rows, 'unchanged', 0, 'duplicates', 0,
                              'hours', v_hours, 'measurements', v_meas, 'systems', to_jsonb(v_systems));
END
$$;
GRANT EXECUTE ON FUNCTION _measure.import_store_runs(boolean) TO measure_writer;

CREATE OR REPLACE FUNCTION _measure.import_store(p_max_problems integer DEFAULT 50,
                                                 p_check_only boolean DEFAULT false)
RETURNS jsonb LANGUAGE plpgsql SET work_mem = '256MB' AS $$
DECLARE
    v_rows bigint;
    v_dups bigint := 0;
    v_same bigint := 0;
    v_stored bigint := 0;
    v_hours bigint;
    v_total bigint;
    v_lo timestamptz;
    v_hi timestamptz;
    v_slack interval;
    v_systems smallint[];
    v_problems jsonb;
    v_meas jsonb;
    v_r record;
BEGIN
    IF to_regclass('pg_temp._import_in') IS NULL THEN
        RAISE EXCEPTION 'nothing staged: call _measure.import_begin() first' USING ERRCODE = '55000';
    END IF;
    -- runs staged (the CLI): stored as they are when nothing needs a closer look
    v_problems := _measure.import_store_runs(p_check_only);
    IF v_problems IS NOT NULL THEN
        RETURN v_problems;
    END IF;
    IF to_regclass('pg_temp._import_meas') IS NOT NULL THEN DROP TABLE pg_temp._import_meas; END IF;
    IF to_regclass('pg_temp._import_rows') IS NOT NULL THEN DROP TABLE pg_temp._import_rows; END IF;
    IF to_regclass('pg_temp._import_old') IS NOT NULL THEN DROP TABLE pg_temp._import_old; END IF;
    IF to_regclass('pg_temp._import_problem') IS NOT NULL THEN DROP TABLE pg_temp._import_problem; END IF;
    CREATE TEMP TABLE _import_problem (line bigint, field text, kind text, other_line bigint,
                                       stored jsonb) ON COMMIT DROP;
    -- the planner sees the staged rows as they are (a temporary table is never analysed by
    -- autovacuum: unanalysed, every join below was planned for a handful of rows)
    ANALYZE pg_temp._import_in;

    -- entities stored under another id (same system, type and key) keep theirs
    UPDATE pg_temp._import_in i SET entity_id = e.entity_id
      FROM _measure.entity e
     WHERE e.system_id = i.system_id AND e.type_code = i.type_code AND e.key = i.key
       AND e.entity_id <> i.entity_id;

    -- the measurements, by name: the lowest id of that name, or a new stopped one
    CREATE TEMP TABLE _import_meas ON COMMIT DROP AS
    SELECT x.system_id, x.name, x.first_line,
           (SELECT min(m.measurement_id) FROM _measure.measurement m
             WHERE m.system_id = x.system_id AND upper(m.name) = x.name) AS measurement_id,
           false AS created
      FROM (SELECT system_id, upper(measurement) AS name, min(line) AS first_line
              FROM pg_temp._import_in GROUP BY 1, 2) x;
    PERFORM _measure.import_new_measurements();

    -- the staged rows with their measurement and times; a row repeated in the file (same
    -- counter record and FROM) is kept once when it is the same, and is a bad row otherwise
    CREATE TEMP TABLE _import_rows ON COMMIT DROP AS
    SELECT i.line, i.system_id, m.measurement_id, i.type_code, i.entity_id, i.key, i.ids, i.cpu,
           _measure.us_to_timestamptz(i.from_us) AS from_at, _measure.us_to_timestamptz(i.to_us) AS to_at,
           i.delta_us, i.error, i.user_type, i.counters,
           first_value(i.line) OVER w AS first_line,
           ROW(i.delta_us, i.cpu, i.error, i.counters) IS NOT DISTINCT FROM
               first_value(ROW(i.delta_us, i.cpu, i.error, i.counters)) OVER w AS same_as_first
      FROM pg_temp._import_in i
      JOIN pg_temp._import_meas m ON m.system_id = i.system_id AND m.name = upper(i.measurement)
    WINDOW w AS (PARTITION BY m.measurement_id, i.entity_id, i.from_us ORDER BY i.line);
    TRUNCATE pg_temp._import_in;  -- (its space back: _import_rows holds the rows now)
    ANALYZE pg_temp._import_rows;
    SELECT count(*) INTO v_rows FROM pg_temp._import_rows;
    INSERT INTO pg_temp._import_problem (line, field, kind, other_line)
    SELECT line, 'FROM-TIMESTAMP', 'file_conflict', first_line FROM pg_temp._import_rows
     WHERE NOT same_as_first;
    WITH gone AS (DELETE FROM pg_temp._import_rows WHERE line <> first_line RETURNING same_as_first)
    SELECT count(*) FILTER (WHERE same_as_first) INTO v_dups FROM gone;
    -- intervals of one counter record that overlap in the file
    INSERT INTO pg_temp._import_problem (line, field, kind, other_line)
    SELECT x.line, 'FROM-TIMESTAMP', 'file_overlap', x.p_line
      FROM (SELECT line, from_at, lag(to_at) OVER w AS p_to, lag(line) OVER w AS p_line
              FROM pg_temp._import_rows
            WINDOW w AS (PARTITION BY measurement_id, entity_id ORDER BY from_at, line)) x
     WHERE x.p_to > x.from_at;

    -- what is stored already: the intervals of the same counter records around the file's range
    SELECT min(from_at), max(to_at), array_agg(DISTINCT system_id),
           greatest(max(delta_us) * INTERVAL '1 microsecond', INTERVAL '1 day')
      INTO v_lo, v_hi, v_systems, v_slack FROM pg_temp._import_rows;
    CREATE TEMP TABLE _import_old ON COMMIT DROP AS
    SELECT o.measurement_id, o.entity_id, o.from_at, o.to_at, o.delta_us, o.cpu, o.error, o.counters
      FROM (SELECT r.measurement_id, r.entity_id,
                   r.from_at + (g.i - 1) * r.delta_us * INTERVAL '1 microsecond' AS from_at,
                   r.from_at + g.i * r.delta_us * INTERVAL '1 microsecond' AS to_at,
                   r.delta_us, r.cpu, r.error, ARRAY(SELECT x FROM unnest(d.c[g.i:g.i][:]) x) AS counters
              FROM _measure.interval_run r
              JOIN (SELECT DISTINCT measurement_id, entity_id FROM pg_temp._import_rows) p
                ON p.measurement_id = r.measurement_id AND p.entity_id = r.entity_id
             CROSS JOIN LATERAL (SELECT r.counters || '{}'::bigint[] AS c OFFSET 0) d
             CROSS JOIN LATERAL generate_series(1, r.n) g (i)
             WHERE r.system_id = ANY (v_systems)
               AND r.from_at >= _measure.hour_of(v_lo) - v_slack AND r.from_at < v_hi) o
     WHERE o.from_at < v_hi AND o.to_at > v_lo;
    -- the same interval stored already: nothing to do
    WITH same AS (
        DELETE FROM pg_temp._import_rows i USING pg_temp._import_old o
         WHERE o.measurement_id = i.measurement_id AND o.entity_id = i.entity_id AND o.from_at = i.from_at
           AND o.delta_us = i.delta_us AND o.cpu = i.cpu AND o.error = i.error AND o.counters = i.counters
        RETURNING 1)
    SELECT count(*) INTO v_same FROM same;
    -- a different one: never overwritten
    INSERT INTO pg_temp._import_problem (line, field, kind, stored)
    SELECT DISTINCT ON (i.line) i.line, 'FROM-TIMESTAMP',
           CASE WHEN o.from_at = i.from_at THEN 'stored_conflict' ELSE 'stored_overlap' END,
           jsonb_build_object('from_us', _measure.timestamptz_to_us(o.from_at),
                              'to_us', _measure.timestamptz_to_us(o.to_at), 'delta_us', o.delta_us,
                              'cpu', o.cpu, 'error', o.error, 'counters', to_jsonb(o.counters),
                              'file', jsonb_build_object('delta_us', i.delta_us, 'cpu', i.cpu, 'error', i.error,
                                                         'counters', to_jsonb(i.counters)))
      FROM pg_temp._import_rows i
      JOIN pg_temp._import_old o
        ON o.measurement_id = i.measurement_id AND o.entity_id = i.entity_id
       AND o.from_at < i.to_at AND o.to_at > i.from_at
     ORDER BY i.line, (o.from_at = i.from_at) DESC, o.from_at;

    -- USERDEF: one TYPE per counter name and measurement, agreeing with the CONTAB
    INSERT INTO pg_temp._import_problem (line, field, kind, stored)
    SELECT x.line, 'TYPE', 'type_conflict', jsonb_build_object('type', x.first_type, 'line', x.first_line)
      FROM (SELECT line, user_type, first_value(user_type) OVER w AS first_type, first_value(line) OVER w AS first_line
              FROM pg_temp._import_rows WHERE user_type IS NOT NULL
            WINDOW w AS (PARTITION BY measurement_id, upper(ids->>'name') ORDER BY line)) x
     WHERE x.user_type <> x.first_type;
    INSERT INTO pg_temp._import_problem (line, field, kind, stored)
    SELECT x.line, 'TYPE', 'type_contab', jsonb_build_object('type', x.contab_type, 'measurement_id', x.measurement_id)
      FROM (SELECT DISTINCT ON (measurement_id, upper(ids->>'name')) line, measurement_id, user_type,
                   _measure.user_counter_type(measurement_id, ids->>'name') AS contab_type
              FROM pg_temp._import_rows WHERE user_type IS NOT NULL
             ORDER BY measurement_id, upper(ids->>'name'), line) x
     WHERE x.contab_type IS NOT NULL AND upper(x.contab_type) <> x.user_type;

    SELECT count(DISTINCT line) INTO v_total FROM pg_temp._import_problem;
    IF v_total > 0 THEN
        SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.line, p.kind), '[]') INTO v_problems
          FROM (SELECT DISTINCT ON (line) * FROM pg_temp._import_problem ORDER BY line, kind) p
         WHERE p.line IN (SELECT DISTINCT line FROM pg_temp._import_problem ORDER BY line LIMIT p_max_problems);
        RAISE EXCEPTION 'import: % bad rows, nothing stored', v_total
            USING ERRCODE = '22023',
                  DETAIL = jsonb_build_object('total', v_total, 'problems', v_problems)::text;
    END IF;

    -- the hours this file writes
    SELECT count(*) INTO v_hours
      FROM (SELECT DISTINCT system_id, _measure.hour_of(from_at) FROM pg_temp._import_rows) h;
    SELECT coalesce(jsonb_agg(jsonb_build_object('system_id', system_id, 'name', name,
                                                 'measurement_id', measurement_id, 'created', created)
                              ORDER BY system_id, name), '[]')
      INTO v_meas FROM pg_temp._import_meas;
    IF p_check_only THEN
        RETURN jsonb_build_object('rows', v_rows + v_dups, 'stored', 0, 'unchanged', v_same,
                                  'duplicates', v_dups, 'hours', 0, 'measurements', v_meas,
                                  'systems', to_jsonb(v_systems));
    END IF;

    -- new entities (when each was first seen in the file)
    INSERT INTO _measure.entity (entity_id, system_id, type_code, key, ids, cpu, first_seen_at)
    SELECT DISTINCT ON (entity_id) entity_id, system_id, type_code, key, ids,
           CASE WHEN cpu >= 0 THEN cpu END, from_at
      FROM pg_temp._import_rows
     ORDER BY entity_id, from_at
    ON CONFLICT DO NOTHING;
    -- USERDEF counter types into the CONTAB of their measurement
    FOR v_r IN SELECT DISTINCT ON (measurement_id, upper(ids->>'name')) measurement_id,
                    upper(ids->>'name') AS name, user_type
               FROM pg_temp._import_rows
              WHERE user_type IS NOT NULL AND _measure.user_counter_type(measurement_id, ids->>'name') IS NULL
              ORDER BY measurement_id, upper(ids->>'name'), line LOOP
        UPDATE _measure.measurement
           SET contab = jsonb_set(contab, '{counters}', coalesce(contab->'counters', '[]')
                                  || jsonb_build_array(jsonb_build_object('name', v_r.name, 'process', '{}'::jsonb,
                                                                          'type', v_r.user_type, 'array', NULL))),
               updated_at = clock_timestamp()
         WHERE measurement_id = v_r.measurement_id;
    END LOOP;
    -- the hours the import writes, of every file it stores in this transaction: the ones it
    -- condenses (measure.import_condense), once, after the last file
    IF to_regclass('pg_temp._import_hours') IS NULL THEN
        CREATE TEMP TABLE _import_hours ON COMMIT DROP AS
        SELECT system_id, _measure.hour_of(from_at) AS hour_at FROM pg_temp._import_rows LIMIT 0;
    END IF;
    INSERT INTO pg_temp._import_hours
    SELECT DISTINCT system_id, _measure.hour_of(from_at) FROM pg_temp._import_rows
    EXCEPT SELECT system_id, hour_at FROM pg_temp._import_hours;
    -- the intervals, stored as runs by the collector's rule; their hours are marked for
    -- condensing (and packing: a run may continue a stored one)
    IF to_regclass('pg_temp._interval_in') IS NULL THEN
        CREATE TEMP TABLE _interval_in (LIKE _measure.interval_record);
    END IF;
    INSERT INTO pg_temp._interval_in (measurement_id, entity_id, record_at, from_at, to_at, delta_us,
                                      closing_kind, system_id, type_code, cpu, error, counters)
    SELECT measurement_id, entity_id, TIMESTAMPTZ '1970-01-01 00:00:00+00', from_at, to_at, delta_us,
           3, system_id, type_code, cpu, error, counters
      FROM pg_temp._import_rows;
    TRUNCATE pg_temp._import_rows;
    ANALYZE pg_temp._interval_in;
    v_stored := _measure.store_intervals();
    RETURN jsonb_build_object('rows', v_rows + v_dups, 'stored', v_stored, 'unchanged', v_same,
                              'duplicates', v_dups, 'hours', v_hours, 'measurements', v_meas,
                              'systems', to_jsonb(v_systems));
END
$$;
GRANT EXECUTE ON FUNCTION _measure.import_store(integer, boolean) TO measure_writer;

-- ---------------------------------------------------------------- the API's way in

-- measure_api changes storage only through these (SECURITY DEFINER, owner = schema owner):
-- the staging table is created by the owner, rows are staged a batch at a time as arrays
-- (counters flattened: p_width values per row), then checked and stored, then condensed, all
-- in the request's one transaction.
CREATE OR REPLACE FUNCTION measure.import_begin()
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM _measure.import_begin();
END
$$;
REVOKE ALL ON FUNCTION measure.import_begin() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.import_begin() TO measure_writer, measure_api;

CREATE OR REPLACE FUNCTION measure.import_stage(
    p_line bigint[], p_system smallint[], p_measurement text[], p_type smallint, p_entity bigint[],
    p_key text[], p_ids jsonb[], p_cpu smallint[], p_from_us bigint[], p_to_us bigint[],
    p_delta_us bigint[], p_error smallint[], p_user_type text[], p_counters bigint[], p_width integer)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_n bigint;
BEGIN
    IF to_regclass('pg_temp._import_in') IS NULL THEN
        RAISE EXCEPTION 'nothing staged: call measure.import_begin() first' USING ERRCODE = '55000';
    END IF;
    IF p_width < 1 OR cardinality(p_counters) <> cardinality(p_line) * p_width THEN
        RAISE EXCEPTION 'import_stage: % counter values for % rows of % counters',
            cardinality(p_counters), cardinality(p_line), p_width USING ERRCODE = '22023';
    END IF;
    INSERT INTO pg_temp._import_in (line, system_id, measurement, type_code, entity_id, key, ids, cpu,
                                    from_us, to_us, delta_us, error, user_type, counters)
    SELECT u.line, u.sys, u.meas, p_type, u.eid, u.key, u.ids, u.cpu, u.f, u.t, u.d, u.err, u.ut,
           p_counters[(u.o - 1) * p_width + 1 : u.o * p_width]
      FROM unnest(p_line, p_system, p_measurement, p_entity, p_key, p_ids, p_cpu, p_from_us, p_to_us,
                  p_delta_us, p_error, p_user_type)
           WITH ORDINALITY u (line, sys, meas, eid, key, ids, cpu, f, t, d, err, ut, o);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;
REVOKE ALL ON FUNCTION measure.import_stage(bigint[], smallint[], text[], smallint, bigint[], text[], jsonb[],
                                            smallint[], bigint[], bigint[], bigint[], smallint[], text[],
                                            bigint[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.import_stage(bigint[], smallint[], text[], smallint, bigint[], text[], jsonb[],
                                               smallint[], bigint[], bigint[], bigint[], smallint[], text[],
                                               bigint[], integer) TO measure_writer, measure_api;

CREATE OR REPLACE FUNCTION measure.import_store(p_max_problems integer DEFAULT 50,
                                                p_check_only boolean DEFAULT false)
RETURNS jsonb LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN _measure.import_store(p_max_problems, p_check_only);
END
$$;
REVOKE ALL ON FUNCTION measure.import_store(integer, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.import_store(integer, boolean) TO measure_writer, measure_api;

-- Condense what an import marked (hours, then shifts, months and years): at most p_limit
-- hours of the system per call, month-level rows deferred unless p_months; returns the
-- hours done (0: nothing left). Only the hours the import wrote (pg_temp._import_hours,
-- made by _measure.import_store), for measure_api.
CREATE OR REPLACE FUNCTION measure.import_condense(p_system smallint, p_limit integer, p_months boolean)
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_hours timestamptz[];
BEGIN
    IF p_months THEN
        RETURN _measure.condense_pending_months(p_system);
    END IF;
    -- only the hours this import wrote (marked dirty by it); what others left dirty (a live
    -- collector's hours) stays theirs to condense
    SELECT array_agg(hour_at ORDER BY hour_at) INTO v_hours
      FROM (SELECT d.hour_at FROM _measure.tier_dirty d
              JOIN pg_temp._import_hours i ON i.system_id = d.system_id AND i.hour_at = d.hour_at
             WHERE d.system_id = p_system
             ORDER BY d.hour_at LIMIT greatest(p_limit, 1) FOR UPDATE OF d SKIP LOCKED) x;
    RETURN _measure.condense_hours(p_system, v_hours, false);
END
$$;
REVOKE ALL ON FUNCTION measure.import_condense(smallint, integer, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.import_condense(smallint, integer, boolean) TO measure_writer, measure_api;

-- The statistics of what an import wrote, inside its transaction, before it condenses: the
-- run partitions of its hours, the entities, the dirty hours and its own list of hours.
-- (Autovacuum analyses rows only after they are committed; planned on the statistics of the
-- empty partitions, condensing 25 hours of a ref16 DISCOPEN file took 26 minutes, one such
-- hour condensed after an ANALYZE 0.93 s: bench/RESULTS.md, issue 31.)
CREATE OR REPLACE FUNCTION measure.import_analyze()
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_part regclass;
BEGIN
    IF to_regclass('pg_temp._import_hours') IS NULL THEN
        RETURN;
    END IF;
    ANALYZE pg_temp._import_hours;
    FOR v_part IN SELECT p.part FROM _measure.run_parts() p
                   WHERE EXISTS (SELECT 1 FROM pg_temp._import_hours h
                                  WHERE (p.lo IS NULL OR h.hour_at >= p.lo) AND (p.hi IS NULL OR h.hour_at < p.hi)) LOOP
        EXECUTE format('ANALYZE %s', v_part);
    END LOOP;
    ANALYZE _measure.entity;
    ANALYZE _measure.tier_dirty;
END
$$;
REVOKE ALL ON FUNCTION measure.import_analyze() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION measure.import_analyze() TO measure_writer, measure_api;
