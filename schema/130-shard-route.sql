-- 130-shard-route: a table that holds no rows and routes a query to one system's data.
--
-- On Citus (005-distribute.citus.sql) it is distributed by system_id beside the interval runs,
-- so a query reading it for one system, e.g.
--
--     INSERT INTO _measure.cpu_hour
--     SELECT r.* FROM (SELECT count(*) FROM _measure.shard_route WHERE system_id = $1) one
--      CROSS JOIN LATERAL _measure.cpu_hour_rows($1, $2) r
--
-- is sent whole to the worker holding that system's shard group: the function runs there,
-- next to the runs it reads, and only its result comes back (the aggregate gives the one row
-- that calls it, whatever the table holds). Called from the coordinator without it, the same
-- function would fetch every interval it reads over the network (issue 20: condensing).
-- On one node the subquery is one probe of an empty index.

CREATE TABLE IF NOT EXISTS _measure.shard_route (
    system_id smallint PRIMARY KEY,
    CONSTRAINT shard_route_holds_no_rows CHECK (false)
);
COMMENT ON TABLE _measure.shard_route IS
    'No rows: a query reading it WHERE system_id = x runs on system x''s shard group on Citus (130-shard-route.sql).';
GRANT SELECT ON _measure.shard_route TO measure_writer;
