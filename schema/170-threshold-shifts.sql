-- 170: thresholds per shift, the most specific row first (schema/idempotent/025-reports.sql,
-- _measure.threshold_winner): a system's row for one shift now replaces the default for that
-- shift's hours only, where before any row of the system replaced the defaults of every shift.
-- The stored violations, threshold rollups and report lines of the systems whose answer
-- changes (those with rows of their own for some shifts and none for every shift, on some
-- entity, item and operator) are rebuilt once, by the idempotent files, from this list.
--
-- Notes on released files (their checksums freeze them; corrected here): 010-tiers.plain.sql
-- names schema/idempotent/021-condense.plain.sql and 010-tiers.timescale.sql
-- schema/idempotent/021-condense.timescale.sql: both became schema/idempotent/021-condense.sql
-- when the hour tiers became tables on both engines (release 100); 010-tiers.timescale.sql's
-- continuous aggregates and their tiers job are gone since then (100-interval-runs.sql).
CREATE TABLE _measure.threshold_rebuild_pending (
    system_id  smallint PRIMARY KEY
);
GRANT SELECT, DELETE ON _measure.threshold_rebuild_pending TO measure_writer;

INSERT INTO _measure.threshold_rebuild_pending (system_id)
SELECT DISTINCT t.system_id
  FROM _measure.threshold t
 WHERE t.system_id IS NOT NULL AND t.shift_no IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM _measure.threshold a
                    WHERE a.system_id = t.system_id AND a.entity = t.entity AND a.item = t.item
                      AND a.operator = t.operator AND a.shift_no IS NULL);
