-- 032-api-cache: tell the API when stored data changes, so its read cache (api/cache.py) can
-- drop answers exactly then and never serve one that a commit made stale.
--
-- Every table of _measure that an API answer can come from gets a statement-level trigger
-- that NOTIFYs channel measuredb_data: payload 'data', or 'token' for _measure.api_token (a
-- token created, revoked or deleted; not its use being recorded). One notification per
-- statement and payload (also for a statement that happens to change no row); PostgreSQL
-- folds the identical ones of a transaction into one, delivered at COMMIT, so a writer slice
-- costs one notification however many tables it touches. Not notified: the
-- collector's heartbeat and checkpoint rows (written every few seconds, read by no cached
-- answer) and the control requests (the API's requests to the collector).
--
-- Tables added by later versioned files get their trigger when this file is applied again
-- (it runs after them on every start). The interval runs are partitioned (plain) or a
-- hypertable: the trigger sits on the parent, and statement-level triggers fire there for
-- rows in any partition or chunk. Not notified: dropping whole days of runs past retention
-- (_measure.retention_run); those days were condensed long before, and retention deletes
-- tier rows with ordinary statements, which notify.

CREATE OR REPLACE FUNCTION _measure.notify_data_changed()
RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('measuredb_data', TG_ARGV[0]);
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION _measure.notify_data_changed() FROM PUBLIC;

DO $$
DECLARE
    v_hyper regclass[] := '{}';  -- hypertables: no TRUNCATE trigger (nothing truncates them)
    r record;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'timescaledb') THEN
        EXECUTE 'SELECT coalesce(array_agg(format(''%I.%I'', hypertable_schema, hypertable_name)::regclass), ''{}'')'
                '  FROM timescaledb_information.hypertables' INTO v_hyper;
    END IF;
    FOR r IN
        SELECT c.oid::regclass AS rel, CASE WHEN c.relname = 'api_token' THEN 'token' ELSE 'data' END AS payload
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = '_measure' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
           AND c.relname NOT IN ('collector_heartbeat', 'collector_state', 'control_request')
    LOOP
        EXECUTE format('CREATE OR REPLACE TRIGGER api_cache_notify AFTER INSERT OR UPDATE%s OR DELETE%s ON %s '
                       'FOR EACH STATEMENT EXECUTE FUNCTION _measure.notify_data_changed(%L)',
                       -- a token's use (last_used_at, recorded by measure.token_scope) changes no answer
                       CASE WHEN r.payload = 'token' THEN ' OF name, scope, token_sha256, revoked_at' ELSE '' END,
                       CASE WHEN r.rel = ANY (v_hyper) THEN '' ELSE ' OR TRUNCATE' END, r.rel, r.payload);
    END LOOP;
END
$$;
