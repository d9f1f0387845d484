#!/usr/bin/env bash
# measuredb on Citus: network trust, roles and database of ONE Citus node (the coordinator or a
# worker), created on the FIRST start of its empty data volume.
#
# Run by the citusdata/citus image's docker-entrypoint.sh as the postgres superuser, against
# its temporary socket-only server, after the image's own 001-create-citus-extension.sql
# (CREATE EXTENSION citus in POSTGRES_DB=measuredb). docker-compose.yml (profile citus) mounts
# this single file into /docker-entrypoint-initdb.d/ of the coordinator and of every worker;
# MEASUREDB_CITUS_NODE says which one this is. It never runs again once the volume holds a
# cluster. The workers are registered with the coordinator afterwards, by the one-shot
# citus-init service (docker/citus/register-nodes.sh).
#
# Every node:
#   - pg_hba.conf: the Citus network (MEASUREDB_CITUS_SUBNET, a compose network marked
#     internal that only the coordinator, the workers and citus-init join) is trusted, so the
#     nodes reach each other without passwords: a query through the coordinator reaches the
#     shards as the session's role (README "Scale-out on Citus", Roles). Every other client
#     needs a password (the image's own rule, kept after this one).
#   - the group roles measure_writer, measure_api, measure_reader (NOLOGIN here; the schema
#     runner lets them log in to the workers, never to the coordinator, on every apply);
#   - measuredb_collector, which owns database measuredb and applies schema/ through the
#     coordinator (the shards and their functions on the workers are its objects too), with
#     CREATEROLE and ADMIN OPTION on the three group roles (see below); measuredb_api.
# The coordinator only:
#   - the passwords of measuredb_collector and measuredb_api (they log in there; on the
#     workers they have none: only the Citus network reaches those).
#
# Passwords reach psql as psql variables (\getenv, psql >= 15) and are quoted by psql
# (:'var'); they never appear in a command line or in string-built SQL.

# A subshell, so that `set -u` and friends do not leak into the entrypoint if the file is
# sourced (the entrypoint sources *.sh files that are not executable).
(
set -Eeuo pipefail

fail() {
	echo "measuredb citus initdb: $*" >&2
	exit 1
}

node="${MEASUREDB_CITUS_NODE:-}"
case "$node" in
	coordinator | worker) ;;
	*) fail "MEASUREDB_CITUS_NODE must be coordinator or worker, not '${node}'" ;;
esac

subnet="${MEASUREDB_CITUS_SUBNET:-}"
if [[ ! "$subnet" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$ ]]; then
	fail "MEASUREDB_CITUS_SUBNET must be an IPv4 network in CIDR form (e.g. 172.31.240.0/24), not '${subnet}'"
fi

if [ "$node" = coordinator ]; then
	for var in MEASUREDB_COLLECTOR_DB_PASSWORD MEASUREDB_API_DB_PASSWORD; do
		if [ -z "${!var:-}" ]; then
			fail "$var is empty; set it in .env (see .env.example) before the first start"
		fi
		# They travel inside DATABASE_URL (postgresql://user:PASSWORD@host/db).
		if [[ ! "${!var}" =~ ^[A-Za-z0-9._~-]+$ ]]; then
			fail "$var must use only the URL-safe characters A-Z a-z 0-9 . _ ~ - (it is placed in DATABASE_URL); generate one with: openssl rand -hex 24"
		fi
	done
fi

# The Citus network first: pg_hba.conf is read top down, the first matching line wins.
hba="${PGDATA:?PGDATA is not set}/pg_hba.conf"
{
	echo "# measuredb: the Citus nodes reach each other over their internal network without a password"
	echo "host all all ${subnet} trust"
	cat "$hba"
} >"$hba.measuredb"
mv "$hba.measuredb" "$hba"

psql --no-psqlrc --set ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres \
	--set node="$node" <<'EOSQL'
\getenv collector_password MEASUREDB_COLLECTOR_DB_PASSWORD
\getenv api_password MEASUREDB_API_DB_PASSWORD
SELECT :'node' = 'coordinator' AS is_coordinator \gset

-- The roles are made on each node by this script, not propagated by Citus (the workers are
-- registered later): no role DDL leaves this node.
SET citus.enable_create_role_propagation = off;
SET citus.enable_alter_role_propagation = off;

-- Group roles: hold the privileges.
SELECT 'CREATE ROLE measure_writer NOLOGIN'
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'measure_writer')\gexec
SELECT 'CREATE ROLE measure_api NOLOGIN'
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'measure_api')\gexec
SELECT 'CREATE ROLE measure_reader NOLOGIN'
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'measure_reader')\gexec

-- Login roles, one per service.
SELECT 'CREATE ROLE measuredb_collector LOGIN'
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'measuredb_collector')\gexec
SELECT 'CREATE ROLE measuredb_api LOGIN'
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'measuredb_api')\gexec

-- CREATEROLE (the same on every node: Citus copies a role's attributes from the coordinator to
-- the workers): the schema runner, as measuredb_collector, lets the group roles log in to the
-- workers (ALTER ROLE <group> LOGIN there, on every run). Since PostgreSQL 16 CREATEROLE
-- reaches only the roles it holds ADMIN OPTION on: the three group roles below, and of the
-- API's and the readers' it gets the administration, not the privileges (INHERIT FALSE, SET FALSE).
ALTER ROLE measuredb_collector WITH LOGIN NOSUPERUSER NOCREATEDB CREATEROLE NOREPLICATION NOBYPASSRLS;
ALTER ROLE measuredb_api WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
\if :is_coordinator
ALTER ROLE measuredb_collector PASSWORD :'collector_password';
ALTER ROLE measuredb_api PASSWORD :'api_password';
\endif
-- (On a worker no password: only the Citus network, trusted above, reaches it.)

GRANT measure_writer TO measuredb_collector WITH ADMIN OPTION, INHERIT TRUE, SET TRUE;
GRANT measure_api, measure_reader TO measuredb_collector WITH ADMIN OPTION, INHERIT FALSE, SET FALSE;
GRANT measure_api TO measuredb_api;

-- The database. The entrypoint created it already (POSTGRES_DB=measuredb), with citus in it.
SELECT 'CREATE DATABASE measuredb'
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_database WHERE datname = 'measuredb')\gexec
ALTER DATABASE measuredb OWNER TO measuredb_collector;
REVOKE ALL ON DATABASE measuredb FROM PUBLIC;
GRANT CONNECT ON DATABASE measuredb TO measure_writer, measure_api, measure_reader;

\connect measuredb
CREATE EXTENSION IF NOT EXISTS citus;
-- PostgreSQL >= 15 already does this; said here so it holds whatever the image.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
EOSQL

echo "measuredb citus initdb: $node ready (roles measuredb_collector, measuredb_api; Citus network $subnet trusted)"
)
