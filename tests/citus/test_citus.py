"""measuredb on a real Citus cluster (a coordinator and two workers from the wheel): the
distributed layout the schema runner makes, ingest through the coordinator by the unchanged
collector (binary COPY into distributed tables), and every tier, report and retention run
against the single-node (plain PostgreSQL) result on one fixed data set of two systems; the
restricted roles and the API through the coordinator; a worker added and the shards
rebalanced while a collector writes.

The data set: two hours of the demo node (\\DEMO, Europe/Amsterdam) and of the et1-txp node
(\\ET1) from 2026-03-28 20:00 UTC, collectors with fixed seeds, loaded the same way into a
plain database and into the cluster.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from collector.service import Collector
from collector.settings import CollectorSettings
from core import schema
from tests.api.conftest import make_client
from tests.citus.cluster import Cluster
from tests.snapshot import differences, snapshot

SECOND = 1_000_000
START = datetime(2026, 3, 28, 20, 0, tzinfo=UTC)
HOURS = 2
NODES = {"demo": 5, "et1-txp": 7}  # node → seed: two systems
DISTRIBUTED = {"interval_run", "extra_copy", "cpu_hour", "disc_hour", "line_hour", "process_hour",
               "userdef_hour", "tmf_hour", "tier_shift", "tier_month", "tier_year", "tier_dirty",
               "month_dirty", "record_tier", "discopen_file_tier", "discopen_open_hours",
               "response_hist", "terminal_hour", "terminal_rollup", "threshold_line",
               "threshold_rollup", "hour_breach", "hour_shadow", "cpu_trend_day", "shard_route", "hour_baseline"}
REFERENCE = {"system", "entity_type", "counter_def", "tier_entity", "tier_item", "measurement", "entity", "shift", "calendar",
             "calendar_shift", "holiday", "threshold", "system_cpu_type", "retention", "purged",
             "record_tier_type", "record_tier_counter", "breach_basis", "breach_state",
             "component_map", "report_definition", "structured_record", "install_info",
             "analysis_setting", "baseline_item", "health_indicator"}


def load(url: str, tmp: Path, *, condense: bool) -> None:
    """The data set: each node's collector backfills HOURS hours (condensing as it writes, or
    only marking the hours, as a bulk load does)."""
    for node, seed in NODES.items():
        settings = CollectorSettings(node=node, seed=seed, interval_seconds=60, backfill_days=0,
                                     data_dir=tmp / node, spool_dir=tmp / node / "spool")
        col = Collector(settings, url)
        col.register(epoch_us=int(START.timestamp()) * SECOND)
        col.build()
        col.writer.condense = condense
        col.backfill(int((START + timedelta(hours=HOURS)).timestamp()) * SECOND)
        col.close()


RAW = ("SELECT s.system_name, r.measurement_id, r.entity_id, r.record_at, r.from_at, r.delta_us, r.n,"
       "       r.closing_kind, r.cpu, r.error, r.counters::text, r.base::text, r.tail::text, r.nonzero"
       "  FROM _measure.interval_run r JOIN _measure.system s USING (system_id)"
       " ORDER BY 1, 2, 3, 4, 5")
HOUR_ROWS = "SELECT x::text FROM measure.cpu_hour x UNION ALL SELECT x::text FROM measure.process_hour x ORDER BY 1"
EXTRA = ("SELECT s.system_name, c.measurement_id, c.entity_id, c.record_at, c.copy_at, c.copy_kind,"
         "       c.counters::text"
         "  FROM _measure.extra_copy c JOIN _measure.system s USING (system_id) ORDER BY 1, 2, 3, 4, 5, 6")


@pytest.fixture(scope="module")
def plain(fresh_database, tmp_path_factory) -> str:
    url = fresh_database("_citus_plain")
    schema.apply(url, mode="off")
    load(url, tmp_path_factory.mktemp("plain"), condense=False)
    return url


@pytest.fixture(scope="module")
def citus(citus_cluster: Cluster, tmp_path_factory) -> str:
    url = citus_cluster.create_database("measuredb_citus")
    result = schema.apply(url)
    assert result.citus and not result.timescaledb
    load(url, tmp_path_factory.mktemp("citus"), condense=False)
    return url


def test_the_runner_distributes_by_system_id_colocated_with_reference_catalogue(citus_cluster, citus) -> None:
    with psycopg.connect(citus) as c:
        tables = {name.removeprefix("_measure."): (kind, column, colocation) for name, kind, column, colocation
                  in c.execute("SELECT table_name::text, citus_table_type, distribution_column, colocation_id"
                               "  FROM citus_tables t JOIN pg_class c ON c.oid = t.table_name"
                               " WHERE c.relnamespace = '_measure'::regnamespace AND NOT c.relispartition")}
        pk = c.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint"
                       " WHERE conrelid = '_measure.interval_run'::regclass AND contype = 'p'").fetchone()[0]
        # condensing computes a system's rows in its shard group: the query reading the empty
        # _measure.shard_route for one system goes whole, function call included, to one worker
        routed = "\n".join(r[0] for r in c.execute(
            "EXPLAIN (COSTS OFF, VERBOSE) SELECT r.* FROM (SELECT count(*) FROM _measure.shard_route"
            " WHERE system_id = 1) one CROSS JOIN LATERAL _measure.cpu_hour_rows(1::smallint,"
            " ARRAY['2026-03-28 20:00+00']::timestamptz[]) r"))
        on_workers = c.execute("SELECT bool_and(success AND result = 't') FROM run_command_on_workers("
                               "$$SELECT to_regprocedure('_measure.note_intervals(smallint,timestamptz,timestamptz)')"
                               " IS NOT NULL$$)").fetchone()[0]
    assert {t for t, v in tables.items() if v[0] == "distributed"} == DISTRIBUTED
    assert {v[1] for t, v in tables.items() if v[0] == "distributed"} == {"system_id"}
    assert len({v[2] for t, v in tables.items() if v[0] == "distributed"}) == 1  # one co-location group
    assert {t for t, v in tables.items() if v[0] == "reference"} == REFERENCE
    assert {t for t, v in tables.items() if v[0] == "local"} == set()  # the coordinator's own: plain tables
    assert pk == "PRIMARY KEY (measurement_id, entity_id, record_at, from_at, system_id)"
    assert on_workers
    assert "Task Count: 1" in routed and "cpu_hour_rows" in routed.split("Task Count: 1", 1)[1], routed
    again = schema.apply(citus)  # idempotent: nothing new, the same layout
    assert (again.applied, again.distributed, again.reference, again.workers) == (
        [], len(DISTRIBUTED), len(REFERENCE), 2) == ([], 26, 26, 2)
    assert again.describe() == ("Citus (26 tables distributed by system_id, co-located; 26 reference tables; "
                                "2 workers)")


def test_the_collector_ingests_through_the_coordinator_exactly_as_on_one_node(plain, citus) -> None:
    with psycopg.connect(plain) as p, psycopg.connect(citus) as c:
        raw_plain, raw_citus = p.execute(RAW).fetchall(), c.execute(RAW).fetchall()
        extra_plain, extra_citus = p.execute(EXTRA).fetchall(), c.execute(EXTRA).fetchall()
        # every system's runs in one shard: its shard group, on one worker
        shards = c.execute("SELECT system_id, count(DISTINCT get_shard_id_for_distribution_column("
                           "'_measure.interval_run', system_id)) FROM _measure.interval_run GROUP BY 1"
                           " ORDER BY 1").fetchall()
    assert len(raw_plain) > 1000 and {r[0] for r in raw_plain} == {"\\DEMO", "\\ET1"}
    assert raw_citus == raw_plain
    assert extra_citus == extra_plain
    assert shards == [(1, 1), (2, 1)]


def test_condensing_and_reports_match_the_single_node_result(plain, citus) -> None:
    days = [START.date(), (START + timedelta(days=1)).date()]
    windows = [(START, START + timedelta(hours=HOURS)), (START + timedelta(minutes=37), START + timedelta(hours=1))]
    snaps = {}
    for name, url in (("plain", plain), ("citus", citus)):
        with psycopg.connect(url) as c:
            c.execute("SELECT _measure.condense()")
            c.commit()
            snaps[name] = {f"{system} {k}": v for system in ("\\DEMO", "\\ET1")
                           for k, v in snapshot(c, system, days, windows).items()}
    assert snaps["plain"]["\\DEMO cpu_hour"] and snaps["plain"]["\\ET1 process_summary[0]"]
    assert differences(snaps["plain"], snaps["citus"]) == []


THRESHOLD_STORE = ["SELECT x::text FROM _measure.hour_breach x ORDER BY 1",
                   "SELECT x::text FROM _measure.threshold_rollup x ORDER BY 1",
                   "SELECT x::text FROM _measure.threshold_line x ORDER BY 1"]
THRESHOLD_EDITS = [  # each in its own transaction, rolled back: the product's calls, and plain SQL
    "SELECT _measure.threshold_set(NULL, 'cpu', 'busy_max', '>', 20)",             # measuredb threshold set
    "SELECT _measure.threshold_set('\\DEMO', 'cpu', 'busy_max', '>', 10, 3)",       # a system's own, one shift (its data has shift 3)
    "SELECT _measure.threshold_remove(NULL, 'cpu', 'qlen_max', '>')",               # measuredb threshold remove
    "SELECT measure.config_threshold_set('\\ET1', 'disc', 'busy_max', '>', 5, NULL, true, NULL)",  # /admin
    "SELECT measure.config_threshold_remove(NULL, 'cpu', 'swap_max', '>', NULL)",
    "UPDATE _measure.threshold SET limit_value = limit_value / 4",
    "INSERT INTO _measure.threshold (system_id, entity, item, operator, limit_value) VALUES (2, 'cpu', 'busy_max', '>', 1)",
    "DELETE FROM _measure.threshold WHERE entity = 'cpu'",
    "TRUNCATE _measure.threshold CASCADE",
]


def _threshold_state(c: psycopg.Connection) -> dict[str, list]:
    days = [START.date(), (START + timedelta(days=1)).date()]
    windows = [(START, START + timedelta(hours=HOURS))]
    out = {q: c.execute(q).fetchall() for q in THRESHOLD_STORE}
    for system in ("\\DEMO", "\\ET1"):
        snap = snapshot(c, system, days, windows, raw=False)
        out.update({f"{system} {k}": v for k, v in snap.items() if k.startswith("threshold")})
    return out


def test_threshold_edits_re_resolve_the_violations_as_on_one_node(plain, citus, monkeypatch) -> None:
    """_measure.threshold is a reference table: its triggers (re-resolving the stored violations,
    threshold lines and rollups in the editing transaction) run on the coordinator's copy of it,
    once per statement. Every way of editing a threshold (the functions `measuredb threshold`
    and /admin/thresholds call, the commands themselves, plain SQL) leaves the same violations
    and threshold reports as on one node."""
    from typer.testing import CliRunner

    from cli.main import app

    for url in (plain, citus):
        with psycopg.connect(url) as c:
            c.execute("SELECT _measure.condense()")
    with psycopg.connect(citus) as c:
        shell = c.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = '_measure.threshold'::regclass"
                          " AND NOT tgisinternal AND tgname LIKE 'threshold%'").fetchone()[0]
        placed = c.execute("SELECT nodeport, result FROM run_command_on_placements('_measure.threshold', $$SELECT"
                           " string_agg(tgname, ',' ORDER BY tgname) FROM pg_trigger WHERE tgrelid = '%%s'::regclass"
                           " AND NOT tgisinternal$$) ORDER BY nodeport = %s DESC",
                           (int(citus.split(":")[-1].split("/")[0]),)).fetchall()
    assert shell == 0  # a worker added later gets none on its copy
    assert placed[0][1] == "threshold_deleted,threshold_inserted,threshold_truncated,threshold_updated"
    assert [r for _, r in placed[1:]] == ["", ""]
    states = {}
    for name, url in (("plain", plain), ("citus", citus)):
        with psycopg.connect(url) as c:
            # each edit starts its transaction, as the commands and the API do (on Citus, multi-shard
            # reads before it in the same transaction may leave a worker's placements touched over
            # two connections: "cannot perform query with placements that were modified over
            # multiple connections"; SET LOCAL citus.multi_shard_modify_mode = sequential first)
            states[name, "before"] = _threshold_state(c)
            c.rollback()
            for edit in THRESHOLD_EDITS:
                c.execute(edit)
                states[name, edit] = _threshold_state(c)
                c.rollback()
            c.execute("SELECT _measure.threshold_set(NULL, 'cpu', 'busy_max', '>', 20)")  # two edits, one transaction
            c.execute("UPDATE _measure.threshold SET enabled = false WHERE entity = 'disc'")
            states[name, "both"] = _threshold_state(c)
            c.rollback()
        # the command itself (its own transaction, committed), then back to the shipped limit
        monkeypatch.setenv("DATABASE_URL", url)
        for limit in ("20", "70"):
            done = CliRunner().invoke(app, ["threshold", "set", "cpu", "busy_max", ">", limit])
            assert done.exit_code == 0, done.output
            with psycopg.connect(url) as c:
                states[name, f"cli {limit}"] = _threshold_state(c)
    assert states["plain", "before"][THRESHOLD_STORE[0]]  # violations to begin with
    for (name, key), state in states.items():
        if name == "citus":
            assert differences(states["plain", key], state) == [], key
    for edit in THRESHOLD_EDITS[:4]:  # every edit changed something
        assert states["plain", edit] != states["plain", "before"], edit
    assert states["plain", "cli 20"] != states["plain", "before"]
    assert states["plain", "cli 70"] == states["plain", "before"]


NEW_SYSTEM = "SELECT _measure.system_add('\\NEW', 9, 'UTC')"
NEW_DEFINITION = ("INSERT INTO _measure.report_definition (name, report, system_id, schedule) SELECT 'fk-test',"
                  " 'threshold', system_id, '0 6 * * *' FROM _measure.system WHERE system_name = '\\NEW'")
NEW_RUN = ("INSERT INTO _measure.report_run (definition_id, system_id, slot_at, report, instance) SELECT"
           " d.definition_id, d.system_id, now(), d.report, 'i' FROM _measure.report_definition d WHERE d.name = 'fk-test'")
REFERENCE_EDITS = {  # each a transaction, rolled back: what it answers, or its error
    "request of no system": ["INSERT INTO _measure.control_request (system_id, kind, payload) VALUES (99, 'status', '{}')"],
    "heartbeat of no system": ["INSERT INTO _measure.collector_heartbeat (collector_id, system_id, node, started_at,"
                               " beat_at, mode) VALUES ('x', 99, 'n', now(), now(), 'live')"],
    "state moved to no system": ["UPDATE _measure.collector_state SET system_id = 99"],
    "run of no definition": ["INSERT INTO _measure.report_run (definition_id, system_id, slot_at, report, instance)"
                             " VALUES (9999, 1, now(), 'threshold', 'i')"],
    "run of no system": ["INSERT INTO _measure.report_run (definition_id, system_id, slot_at, report, instance)"
                         " SELECT min(definition_id), 99, now(), 'threshold', 'i' FROM _measure.report_definition"],
    "a good request": ["INSERT INTO _measure.control_request (system_id, kind, payload) VALUES (1, 'status', '{}')"],
    "removing a system with a request": [
        NEW_SYSTEM, "INSERT INTO _measure.control_request (system_id, kind, payload) SELECT system_id, 'status', '{}'"
                    " FROM _measure.system WHERE system_name = '\\NEW'", "SELECT _measure.system_remove('\\NEW')"],
    "deleting a system with a heartbeat": [
        NEW_SYSTEM, "INSERT INTO _measure.collector_heartbeat (collector_id, system_id, node, started_at, beat_at, mode)"
                    " SELECT 'x', system_id, 'n', now(), now(), 'live' FROM _measure.system WHERE system_name = '\\NEW'",
        "DELETE FROM _measure.system WHERE system_name = '\\NEW'"],
    "removing a system takes its runs": [NEW_SYSTEM, NEW_DEFINITION, NEW_RUN, "SELECT count(*) FROM _measure.report_run",
                                         "SELECT _measure.system_remove('\\NEW')",
                                         "SELECT count(*) FROM _measure.report_run"],
    "deleting a definition takes its runs": [NEW_SYSTEM, NEW_DEFINITION, NEW_RUN,
                                             "DELETE FROM _measure.report_definition WHERE name = 'fk-test'",
                                             "SELECT count(*) FROM _measure.report_run"],
}


def test_the_coordinators_own_tables_keep_their_references_as_on_one_node(plain, citus) -> None:
    """The coordinator's own tables (collector state, heartbeats, requests, report runs) lost
    their foreign keys to the reference tables on Citus; triggers keep the same integrity: a
    bad reference is refused with the foreign key's error, a system still referenced is not
    removed, and report runs go with their system or definition."""
    answers: dict[tuple[str, str], list] = {}
    for name, url in (("plain", plain), ("citus", citus)):
        with psycopg.connect(url) as c:
            for label, statements in REFERENCE_EDITS.items():
                out: list = []
                try:
                    for q in statements:
                        cur = c.execute(q)
                        out.append(cur.fetchall() if cur.description else cur.statusmessage)
                except psycopg.Error as exc:
                    out.append((exc.sqlstate, exc.diag.message_primary, exc.diag.message_detail))
                c.rollback()
                answers[name, label] = out
    for label in REFERENCE_EDITS:
        assert answers["citus", label] == answers["plain", label], label
    for label in list(REFERENCE_EDITS)[:5]:
        assert answers["plain", label][-1][0] == "23503", label
    assert answers["plain", "a good request"] == ["INSERT 0 1"]
    assert answers["plain", "removing a system with a request"][-1][0] == "55000"
    assert answers["plain", "deleting a system with a heartbeat"][-1][0] == "23503"
    assert answers["plain", "removing a system takes its runs"][-3:] == [[(1,)], [("\\NEW",)], [(0,)]]
    assert answers["plain", "deleting a definition takes its runs"][-1] == [(0,)]


def test_bad_engine_settings_are_refused_and_apply_nothing(fresh_database, citus_cluster) -> None:
    plain_url = fresh_database("_citus_refused")
    with pytest.raises(schema.SchemaError, match="MEASUREDB_ENGINE=citus, but this database has no citus "
                                                 "extension and the server does not preload it"):
        schema.apply(plain_url, mode="off", engine="citus")
    with psycopg.connect(plain_url) as c:
        assert schema.database_version(c) is None
    url = citus_cluster.create_database("measuredb_citus_refused")
    with pytest.raises(schema.SchemaError, match="MEASUREDB_ENGINE=postgresql, but this database has the citus"):
        schema.apply(url, engine="postgresql")
    with pytest.raises(schema.SchemaError, match="MEASUREDB_TIMESCALEDB=on, but this database has Citus"):
        schema.apply(url, mode="on")
    with psycopg.connect(url) as c:
        assert schema.database_version(c) is None
    citus_cluster.drop_database("measuredb_citus_refused")


def test_retention_removes_exactly_what_it_removes_on_one_node(plain, citus) -> None:
    """Retention as on one node: a dry run, then raw days and hour rows (first run), then the
    shift rows of a day (second run, five weeks on): the same purge reports, and every tier
    and report the same afterwards. All in one transaction, rolled back."""
    runs = [("2026-03-31 21:00+00", True), ("2026-03-31 21:00+00", False), ("2026-05-02 00:30+00", False)]
    days = [START.date(), (START + timedelta(days=1)).date()]
    windows = [(START, START + timedelta(hours=HOURS))]
    results: dict[str, list] = {}
    for name, url in (("plain", plain), ("citus", citus)):
        with psycopg.connect(url) as c:
            c.execute("SELECT _measure.condense()")
            for cls, keep in (("raw", "1 day"), ("hour", "3 days"), ("day", "34 days")):
                c.execute("SELECT _measure.retention_set(%s, %s::interval)", (cls, keep))
            out = []
            for now, dry in runs:
                done = c.execute("SELECT _measure.retention_run(%s, %s::timestamptz) - 'purge_id'", (dry, now)).fetchone()[0]
                left = c.execute("SELECT (SELECT count(*) FROM _measure.interval_run),"
                                 "       (SELECT min(hour_at) FROM _measure.cpu_hour),"
                                 "       (SELECT count(*) FROM _measure.tier_shift)").fetchone()
                out.append((done, left, {f"{system} {k}": v for system in ("\\DEMO", "\\ET1")
                                         for k, v in snapshot(c, system, days, windows).items()}))
            results[name] = out
            c.rollback()
    for (done_p, left_p, snap_p), (done_c, left_c, snap_c) in zip(results["plain"], results["citus"], strict=True):
        assert done_c == done_p
        assert left_c == left_p
        assert differences(snap_p, snap_c) == []
    dry, first, second = results["plain"]
    assert dry[1][0] > 1000 and dry[0]["removed"]  # the dry run says what, and removes nothing
    assert first[1][:2] == (0, START + timedelta(hours=1))  # the raw day and the first hour gone
    assert {r["object"] for r in first[0]["removed"]} >= {"_measure.interval_run_p20260328", "_measure.cpu_hour"}
    assert first[1][2] > 0 and second[1][1] is None and second[1][2] < first[1][2]  # then the 03-28 shifts


ROLE_READS = [
    "SELECT count(*), sum(delta_us) FROM measure.interval_record WHERE system_id = 1",
    "SELECT count(*) FROM measure.interval_record",
    "SELECT x::text FROM measure.report_busy_process('\\DEMO', %(f)s, %(t)s, 0) x ORDER BY 1",
    "SELECT x::text FROM measure.cpu_series('\\ET1', %(f)s, %(t)s) x ORDER BY 1",
    "SELECT x::text FROM measure.cpu_hour x ORDER BY 1",
]


def test_the_restricted_roles_read_as_on_one_node_and_grants_reach_the_workers(plain, citus) -> None:
    """measure_api (the API's SET ROLE) and measure_reader (Grafana's group) read the views and
    call the reports through the coordinator, which reaches the shards as them; they still
    cannot read the coordinator's own tables; every function has the same grants on the
    workers as on the coordinator."""
    window = {"f": START, "t": START + timedelta(hours=HOURS)}
    answers = {}
    for name, url in (("plain", plain), ("citus", citus)):
        with psycopg.connect(url) as c:
            c.execute("SELECT _measure.condense()")
            c.commit()
            for role in ("measure_api", "measure_reader"):
                c.execute(f"SET ROLE {role}")
                answers[name, role] = [c.execute(q, window).fetchall() for q in ROLE_READS]
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    c.execute("SELECT count(*) FROM _measure.api_token")
                c.rollback()
    for role in ("measure_api", "measure_reader"):
        assert answers["citus", role] == answers["plain", role]
        assert answers["plain", role][0][0][0] > 1000 and answers["plain", role][2]
    acl = ("SELECT json_object_agg(p.oid::regprocedure::text, p.proacl::text ORDER BY 1) FROM pg_proc p"
           " WHERE p.pronamespace IN ('_measure'::regnamespace, 'measure'::regnamespace)")
    with psycopg.connect(citus) as c:
        on_coordinator = c.execute(acl).fetchone()[0]
        on_workers = [json.loads(r) for ok, r in c.execute(
            "SELECT success, result FROM run_command_on_workers(%s)", (acl,)).fetchall() if ok]
    assert "measure_api=X/postgres" in on_coordinator["measure.report_threshold(text,date,integer)"]
    assert on_workers == [on_coordinator, on_coordinator]


def test_the_api_answers_as_on_one_node_with_its_read_cache_off(plain, citus, caplog) -> None:
    """The API on the coordinator: the same answers as on one node, as measure_api; its read
    cache is off (writes to distributed tables notify nothing) and says so once."""
    url = "/tiers/cpu/hour?system=%5CDEMO&limit=500"
    bodies = {}
    caplog.set_level(logging.WARNING, logger="api.cache")
    for name, db in (("plain", plain), ("citus", citus)):
        with psycopg.connect(db) as c:
            c.execute("SELECT _measure.condense()")
        with make_client(db) as client:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                health = client.get("/health").json()["cache"]
                if health["listening"] or not health["enabled"]:
                    break
                time.sleep(0.05)
            first, second = client.get(url), client.get(url)
            assert first.status_code == second.status_code == 200
            bodies[name] = (health, first.json(), second.headers.get("x-cache"))
    assert bodies["plain"][0]["enabled"] and bodies["plain"][2] == "hit"
    assert not bodies["citus"][0]["enabled"] and bodies["citus"][2] is None
    assert bodies["citus"][1] == bodies["plain"][1] and bodies["plain"][1]["items"]
    assert [r.getMessage() for r in caplog.records if r.name == "api.cache"] == [
        "read cache off: the database is Citus: writes to its distributed tables reach no trigger on the "
        "coordinator, so no change would be notified; every read goes to the database"]


def test_adding_a_worker_and_rebalancing_while_a_collector_writes_loses_and_duplicates_nothing(
        citus_cluster: Cluster, fresh_database, tmp_path_factory) -> None:
    """A third worker joins and citus_rebalance_start moves shard groups to it (by logical
    replication, writes going on) while the demo collector backfills, condensing as it writes:
    afterwards every interval run, copy and hour row is there once, exactly as a single node
    stores the same backfill."""
    hours, node, seed = 4, "demo", 5
    tmp = tmp_path_factory.mktemp("rebalance")

    def write(url: str, where: str, done: dict) -> None:
        settings = CollectorSettings(node=node, seed=seed, interval_seconds=60, backfill_days=0,
                                     data_dir=tmp / where, spool_dir=tmp / where / "spool")
        col = Collector(settings, url)
        col.register(epoch_us=int(START.timestamp()) * SECOND)
        col.build()
        col.backfill(int((START + timedelta(hours=hours)).timestamp()) * SECOND)
        col.close()
        done["at"] = time.monotonic()

    plain_url = fresh_database("_citus_rebalance_plain")
    schema.apply(plain_url, mode="off")
    write(plain_url, "plain", {})
    url = citus_cluster.create_database("measuredb_citus_rebalance")
    schema.apply(url)
    done: dict = {}
    writer = threading.Thread(target=write, args=(url, "citus", done))
    new = None
    try:
        # as the README says: the worker added, the schema applied again (the reference tables
        # and the roles' logins on it; no shard on it yet)
        new = citus_cluster.add_worker(citus_cluster.coordinator.pgdata.parent / "worker3",
                                       "measuredb_citus_rebalance")
        schema.apply(url)
        writer.start()
        with psycopg.connect(url, autocommit=True) as c:
            while not c.execute("SELECT EXISTS (SELECT 1 FROM _measure.cpu_hour)").fetchone()[0]:
                assert writer.is_alive(), "the collector stopped before writing"
                time.sleep(0.2)
            c.execute("SELECT citus_rebalance_start()")
            started = time.monotonic()
            writing_during = writer.is_alive()
            c.execute("SELECT citus_rebalance_wait()")
            writer.join(timeout=600)
            moved = c.execute("SELECT count(*) FROM citus_shards WHERE nodeport = %s AND table_name"
                              " = '_measure.interval_run'::regclass", (new.port,)).fetchone()[0]
            jobs = c.execute("SELECT state::text FROM pg_dist_background_job ORDER BY job_id").fetchall()
        with psycopg.connect(plain_url) as p, psycopg.connect(url) as c:
            raw_plain, raw_citus = p.execute(RAW).fetchall(), c.execute(RAW).fetchall()
            extra_plain, extra_citus = p.execute(EXTRA).fetchall(), c.execute(EXTRA).fetchall()
            hour_plain, hour_citus = (x.execute(HOUR_ROWS).fetchall() for x in (p, c))
    finally:
        writer.join(timeout=600)
        if new is not None:
            new.stop()
            citus_cluster.workers.remove(new)
        citus_cluster.databases.discard("measuredb_citus_rebalance")
    assert writing_during and done["at"] > started  # the moves overlapped the writes
    assert jobs == [("finished",)] and moved > 0
    assert len(raw_plain) > 1000
    assert raw_citus == raw_plain
    assert extra_citus == extra_plain
    assert len(hour_plain) > 100 and hour_citus == hour_plain
