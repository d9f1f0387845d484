#!/usr/bin/env bash
# measuredb on Citus: register the workers with the coordinator (the one-shot citus-init service
# of docker-compose.yml, profile citus). Idempotent: it runs on every `docker compose up`, adds
# what is missing and checks that every worker is active, then exits 0; collector-citus starts
# only after it succeeded (depends_on: service_completed_successfully).
#
# It runs in the citusdata/citus image on the internal Citus network, whose clients every node
# trusts (docker/citus/010_measuredb_citus.sh), so it needs no password. Settings:
#   MEASUREDB_CITUS_COORDINATOR  the coordinator's name on the Citus network (the one the workers
#                                use to reach it, recorded by citus_set_coordinator_host)
#   MEASUREDB_CITUS_WORKERS      the workers' names on the Citus network, separated by spaces
# (each name may end in :port; 5432 otherwise)
# Afterwards the collector applies schema/ through the coordinator (measuredb schema apply at
# its start), which distributes the tables and lets the group roles log in to the workers.
#
# Adding a worker later: add a citus-workerN service like the others, put it in
# MEASUREDB_CITUS_WORKERS, `docker compose --profile citus up -d`, then on the coordinator
# `measuredb schema apply` and SELECT citus_rebalance_start() (README "Scale-out on Citus").

set -Eeuo pipefail

fail() {
	echo "measuredb citus-init: $*" >&2
	exit 1
}

coordinator="${MEASUREDB_CITUS_COORDINATOR:?MEASUREDB_CITUS_COORDINATOR is not set}"
read -r -a workers <<<"${MEASUREDB_CITUS_WORKERS:?MEASUREDB_CITUS_WORKERS is not set}"
[ "${#workers[@]}" -gt 0 ] || fail "MEASUREDB_CITUS_WORKERS names no worker"

sql() {
	# $1: host[:port]; the rest: psql arguments
	local host="${1%%:*}" port=5432
	[ "$host" = "$1" ] || port="${1#*:}"
	shift
	psql --no-psqlrc --set ON_ERROR_STOP=1 --quiet --tuples-only --no-align \
		--host "$host" --port "$port" --username postgres --dbname measuredb "$@"
}

# The services are healthy when this starts (depends_on); a node may still be finishing its
# first-start initialisation behind a ready TCP port, so wait for the citus extension.
for node in "$coordinator" "${workers[@]}"; do
	for _ in $(seq 1 60); do
		if [ "$(sql "$node" -c "SELECT count(*) FROM pg_extension WHERE extname = 'citus'" 2>/dev/null)" = 1 ]; then
			continue 2
		fi
		sleep 2
	done
	fail "$node: no citus extension in database measuredb after 120 s"
done

port_of() {
	if [ "${1%%:*}" = "$1" ]; then echo 5432; else echo "${1#*:}"; fi
}

sql "$coordinator" --set host="${coordinator%%:*}" --set port="$(port_of "$coordinator")" >/dev/null <<'EOSQL'
SELECT citus_set_coordinator_host(:'host', :port)
 WHERE NOT EXISTS (SELECT FROM pg_dist_node WHERE groupid = 0 AND nodename = :'host' AND nodeport = :port);
EOSQL

for worker in "${workers[@]}"; do
	sql "$coordinator" --set host="${worker%%:*}" --set port="$(port_of "$worker")" >/dev/null <<'EOSQL'
SELECT citus_add_node(:'host', :port)
 WHERE NOT EXISTS (SELECT FROM pg_dist_node WHERE nodename = :'host' AND nodeport = :port);
EOSQL
done

# The roles become Citus objects here, created on (or brought in line with) every worker by the
# superuser: Citus copies a role to the workers the first time a distributed object depends on
# it (its owner, and the groups of that owner), with an ALTER ROLE … NOSUPERUSER that only a
# superuser may run; without this the collector's first schema apply fails with "permission
# denied to alter role". A throw-away reference table owned by measuredb_collector (member or
# administrator of the three group roles) is that object; the schema _measure it sits in is
# measuredb_collector's, who then applies schema/ into it.
sql "$coordinator" >/dev/null <<'EOSQL'
BEGIN;
CREATE SCHEMA IF NOT EXISTS _measure AUTHORIZATION measuredb_collector;
CREATE TABLE _measure.citus_init_roles (x integer);
ALTER TABLE _measure.citus_init_roles OWNER TO measuredb_collector;
SELECT create_reference_table('_measure.citus_init_roles');
DROP TABLE _measure.citus_init_roles;
COMMIT;
-- The schema runner copies the reference tables to every worker on each run (so also to a
-- worker added since), as measuredb_collector, the tables' owner.
GRANT EXECUTE ON FUNCTION pg_catalog.replicate_reference_tables TO measuredb_collector;
EOSQL

active="$(sql "$coordinator" -c "SELECT count(*) FROM pg_dist_node WHERE groupid <> 0 AND isactive AND noderole = 'primary'")"
if [ "$active" -lt "${#workers[@]}" ]; then
	fail "only $active of ${#workers[@]} workers are active on the coordinator"
fi
echo "measuredb citus-init: coordinator $coordinator, $active active workers (${workers[*]})"
