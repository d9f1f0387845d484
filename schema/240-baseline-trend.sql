-- 240: baselines that follow growth, and queues judged by ratio (issue 30; docs/analysis.md).
--
-- Until here a baseline was the median of the same local hour of the weeks before, and every
-- item was judged by its difference from it. On the demo's fifth week (30 % more load a month)
-- that lagged every growing item, and the receive queues of servers in CPUs that growth was
-- saturating (0.19, 0.35, 1.31, then 7.41 requests on four Fridays) came out as 25 major
-- exceptions in a week without a single injected anomaly (bench_analysis_truth). From here:
--   * the baseline follows the item's trend: when the same hour rose every week learned (or
--     fell every week), three weeks or more, the median week-over-week change is carried
--     forward to the hour judged (060-analysis.sql _measure.baseline_rows);
--   * an item with a `ratio` is judged on the logarithm of (value + floor): a queue grows by
--     multiples of itself as its server saturates (length rho / (1 - rho)), so its band is a
--     ratio, at least x ratio for a minor exception (and ratio ^ (major / minor) for a major).
-- Rows an operator changed keep their ratio; the stored hours are judged again once
-- (060-analysis.sql, _measure.analysis_method).

ALTER TABLE _measure.baseline_item
    ADD COLUMN ratio double precision CHECK (ratio IS NULL OR ratio > 1);

UPDATE _measure.baseline_item SET ratio = 2.5
 WHERE (entity, item) IN (('cpu', 'qlen'), ('disc', 'qlen'), ('process', 'pqlen'));

-- The judging method the stored verdicts were made with: 060-analysis.sql judges every stored
-- hour again when it is older than the functions' own.
CREATE TABLE _measure.analysis_method (
    only_row  boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    version   integer NOT NULL
);
INSERT INTO _measure.analysis_method VALUES (true, 1);
GRANT SELECT ON _measure.analysis_method TO measure_writer;
