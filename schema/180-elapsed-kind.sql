-- 180: the H-, J- and L-series catalogue (issue 29). The SQLPROC and SQLSTMT counters of kind
-- Elapsed (ELAPSED-BUSY-TIME, OPEN-TIME …; measure-reference §2) are a tenth counter kind,
-- "elapsed": stored as an interval delta like busy, and RATE ON, as MEASCOM shows it, the
-- percent of the interval (measure.rate, schema/idempotent/010-interface.sql); per call
-- (ELAPSED-BUSY-TIME / CALLS) is a report's figure. The catalogue rows themselves (the new
-- entity types SQLPROC, SQLSTMT, SERVERNET, DISKFILE, OSSCPU, OSSNS and the IPU counters of
-- CPU and PROCESS) are loaded by the schema runner after this file, like every release's.
--
-- (in a DO block: Citus sends an ALTER TABLE of a reference table to the workers as its query
-- string, which here would be this whole file)
DO $kind$
BEGIN
    ALTER TABLE _measure.counter_def DROP CONSTRAINT counter_def_kind_check;
    ALTER TABLE _measure.counter_def ADD CONSTRAINT counter_def_kind_check
        CHECK (kind IN ('incrementing', 'accumulating', 'busy', 'queue', 'qbusy', 'response',
                        'snapshot', 'maxq', 'maxvalue', 'elapsed'));
END
$kind$;
