#!/usr/bin/env bash
# measuredb: database, extension and roles, created on the FIRST start of an empty data volume.
#
# Run by the timescale/timescaledb image's docker-entrypoint.sh as the postgres superuser,
# against its temporary socket-only server. docker-compose.yml mounts this single file into
# /docker-entrypoint-initdb.d/ (not the whole folder, which would hide the image's own
# 000_install_timescaledb.sh and 001_timescaledb_tune.sh); the 010_ prefix runs it after them.
#
# It never runs again once the volume holds a cluster. To change a password later:
#   docker compose exec timescaledb psql -U postgres -c "\password measuredb_api"
# and update .env to match.
#
# Roles (privileges on objects are granted by schema/, right after each object):
#   measure_writer  NOLOGIN group  <- measuredb_collector (LOGIN, owns database measuredb,
#                                     applies schema/ at start)
#   measure_api     NOLOGIN group  <- measuredb_api       (LOGIN)
#   measure_reader  NOLOGIN group  <- measuredb_grafana   (LOGIN, read-only)
#
# Passwords reach psql as psql variables (\getenv, psql >= 15) and are quoted by psql
# (:'var'); they never appear in a command line or in string-built SQL.

# A subshell, so that `set -u` and friends do not leak into the entrypoint if the file is
# sourced (the entrypoint sources *.sh files that are not executable).
(
set -Eeuo pipefail

fail() {
	echo "measuredb initdb: $*" >&2
	exit 1
}

for var in MEASUREDB_COLLECTOR_DB_PASSWORD MEASUREDB_API_DB_PASSWORD MEASUREDB_GRAFANA_DB_PASSWORD; do
	if [ -z "${!var:-}" ]; then
		fail "$var is empty; set it in .env (see .env.example) before the first start"
	fi
done

# The collector and API passwords travel inside DATABASE_URL (postgresql://user:PASSWORD@host/db),
# where @ : / ? # % and spaces would have to be percent-encoded. Refuse them here, at the first
# start, rather than let the services fail later with a confusing URL error.
for var in MEASUREDB_COLLECTOR_DB_PASSWORD MEASUREDB_API_DB_PASSWORD; do
	if [[ ! "${!var}" =~ ^[A-Za-z0-9._~-]+$ ]]; then
		fail "$var must use only the URL-safe characters A-Z a-z 0-9 . _ ~ - (it is placed in DATABASE_URL); generate one with: openssl rand -hex 24"
	fi
done

psql --no-psqlrc --set ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres <<'EOSQL'
\getenv collector_password MEASUREDB_COLLECTOR_DB_PASSWORD
\getenv api_password MEASUREDB_API_DB_PASSWORD
\getenv grafana_password MEASUREDB_GRAFANA_DB_PASSWORD

-- Group roles: hold the privileges; nobody logs in as them.
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
SELECT 'CREATE ROLE measuredb_grafana LOGIN'
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'measuredb_grafana')\gexec

ALTER ROLE measuredb_collector WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
  PASSWORD :'collector_password';
ALTER ROLE measuredb_api WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
  PASSWORD :'api_password';
ALTER ROLE measuredb_grafana WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
  PASSWORD :'grafana_password';

GRANT measure_writer TO measuredb_collector;
GRANT measure_api TO measuredb_api;
GRANT measure_reader TO measuredb_grafana;

-- Grafana only reads. Privileges are the real fence (schema/ grants it SELECT only);
-- this makes a stray write fail even where a grant was too wide.
ALTER ROLE measuredb_grafana SET default_transaction_read_only = on;

-- The database. The entrypoint normally created it already (POSTGRES_DB=measuredb).
SELECT 'CREATE DATABASE measuredb'
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_database WHERE datname = 'measuredb')\gexec
ALTER DATABASE measuredb OWNER TO measuredb_collector;
REVOKE ALL ON DATABASE measuredb FROM PUBLIC;
GRANT CONNECT ON DATABASE measuredb TO measure_writer, measure_api, measure_reader;

\connect measuredb
CREATE EXTENSION IF NOT EXISTS timescaledb;
-- PostgreSQL >= 15 already does this; said here so it holds whatever the image.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
EOSQL

echo "measuredb initdb: roles measuredb_collector, measuredb_api, measuredb_grafana ready"
)
