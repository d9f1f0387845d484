"""Upgrade in place (a release-130 database: test_upgrade_from_130_stores_runs_inline, at the end).

A database at the last release before the interval runs (schema version
90, tests/fixtures/schema-090) moves to today's layout with its data (schema/101-interval-runs-migrate.sql), and every
interval record, copy, tier, report and dashboard function answers exactly as before.

The data is written the way release 90 stored it (a copy and an interval record per entity
and interval) from six hours of the demo node across a daylight-saving change, with a second,
overlapping measurement of the CPUs and processes, and condensed by release 90's own code."""

from __future__ import annotations

import csv
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from collector.measure.contab import ContabBuilder
from collector.measure.copies import IntervalBuilder
from collector.measure.measmon import Copy, Measmon, Measurement
from collector.node.engine import Node
from collector.node.topology import load_node
from collector.service import default_contab
from collector.sink import (
    COPY_COLUMNS,
    COPY_HEADER,
    COPY_TRAILER,
    EntityRegistry,
    Pipeline,
    Writer,
    encode_rows,
)
from core import schema
from core.catalog import load_catalog
from tests.engine import MODE
from tests.snapshot import differences, snapshot, tier_columns

OLD_SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "schema-090"
CAT = load_catalog()
SECOND = 1_000_000
START = datetime(2026, 3, 28, 22, 0, tzinfo=UTC)        # Amsterdam: 23:00 CET, DST at 01:00 UTC
HOURS = 6
INTERVAL_COLUMNS = ("measurement_id", "entity_id", "record_at", "from_at", "to_at", "delta_us",
                    "closing_kind", "system_id", "type_code", "cpu", "error", "counters")


def load_as_release_90(url: str) -> None:
    """The demo node under two measurements, stored as release 90's writer stored it."""
    topo = load_node("demo")
    start_us = int(START.timestamp()) * SECOND
    with psycopg.connect(url) as c:
        sid = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) VALUES (%s, %s, %s)"
                        " RETURNING system_id", (topo.system_name, topo.system_number, topo.time_zone)).fetchone()[0]
        for _mid, name in ((1, "DEFAULT"), (2, "CPLN")):
            c.execute("INSERT INTO _measure.measurement (system_id, name, contab, state) VALUES (%s, %s, '{}', 'running')"
                      " RETURNING measurement_id", (sid, name))
    node = Node(topo, "demo", seed=11, start_us=start_us, catalog=CAT, step_us=60 * SECOND)
    registry = EntityRegistry(CAT, node.tables, sid)
    builder = IntervalBuilder(CAT)
    entities: list = []
    copies: list[bytes] = []
    intervals: list[bytes] = []

    def on_copy(copy: Copy) -> None:
        batch = builder.on_copy(copy)
        code = CAT.entity(copy.entity).code
        ids = registry.ids(copy.entity, copy.slots, copy.at_us, entities)
        copies.append(encode_rows(COPY_COLUMNS, {
            "measurement_id": copy.measurement_id, "entity_id": ids, "record_at": copy.alloc_us,
            "copy_at": copy.at_us, "copy_kind": copy.kind, "system_id": sid, "type_code": code,
            "cpu": copy.cpu, "error": copy.error}, copy.values))
        if batch is not None and len(batch):
            bids = registry.ids(copy.entity, batch.slots, copy.at_us, entities)
            intervals.append(encode_rows(INTERVAL_COLUMNS, {
                "measurement_id": batch.measurement_id, "entity_id": bids, "record_at": batch.alloc_us,
                "from_at": batch.from_us, "to_at": batch.to_us, "delta_us": batch.to_us - batch.from_us,
                "closing_kind": batch.closing_kind, "system_id": sid, "type_code": code, "cpu": batch.cpu,
                "error": 0}, batch.values))

    mon = Measmon(node, on_copy, catalog=CAT, on_state=lambda *a: None)
    mon.add(Measurement(1, "DEFAULT", default_contab(topo), start_us=start_us, interval_us=60 * SECOND))
    second = ContabBuilder()
    second.add("cpu", None)
    second.add("process", None)
    mon.add(Measurement(2, "CPLN", second.build(), start_us=start_us + 3600 * SECOND,
                        stop_us=start_us + 4 * 3600 * SECOND, interval_us=300 * SECOND))
    mon.run_until(start_us + HOURS * 3600 * SECOND)
    with psycopg.connect(url) as c:
        c.cursor().executemany(
            "INSERT INTO _measure.entity (entity_id, system_id, type_code, key, ids, cpu, first_seen_at)"
            " VALUES (%s, %s, %s, %s, %s::jsonb, %s, _measure.us_to_timestamptz(%s))",
            [(eid, sid, code, key, ids, cpu if cpu >= 0 else None, at) for eid, code, key, ids, cpu, at in entities])
        for table, columns, payload in (("counter_copy", COPY_COLUMNS, copies),
                                        ("interval_record", INTERVAL_COLUMNS, intervals)):
            with c.cursor().copy(f"COPY _measure.{table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as cp:
                cp.write(COPY_HEADER)
                for chunk in payload:
                    cp.write(chunk)
                cp.write(COPY_TRAILER)
        c.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)",
                  (sid, START, START + timedelta(hours=HOURS)))
    with psycopg.connect(url, autocommit=True) as c:  # release 90 condensed in its own way per engine
        if c.execute("SELECT timescaledb FROM _measure.install_info").fetchone()[0]:
            c.execute("CALL _measure.tiers_job(0, '{}')")
        else:
            c.execute("SELECT _measure.condense(NULL, 100000)")


def release_90_schema(tmp: Path, fixture: Path = OLD_SCHEMA) -> Path:
    """tests/fixtures/schema-090 (or another release's fixture) as today's runner reads it: the versioned and idempotent files as
    released, the catalogue's entity types and counters as released, in today's catalogue format
    (the runner loading it is today's): entities.csv gains today's tier_order column, and
    tier_items.csv is today's (a release-90 database has no tables for them; they are not loaded)."""
    d = tmp / fixture.name
    shutil.copytree(fixture, d)
    tier_order = {e.name: str(e.tier_order) for e in CAT.tiered}
    path = d / "catalog" / "entities.csv"
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    fields = [*(k for k in rows[0] if k != "help"), "tier_order", "help"]
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fields, lineterminator="\n")
        w.writeheader()
        w.writerows({**r, "tier_order": tier_order.get(r["entity"], "")} for r in rows)
    shutil.copy(schema.SCHEMA_DIR / "catalog" / "tier_items.csv", d / "catalog" / "tier_items.csv")
    return d


def test_upgrade_keeps_every_answer(fresh_database, tmp_path) -> None:
    url = fresh_database("_upgrade")
    assert schema.apply(url, mode=MODE, schema_dir=release_90_schema(tmp_path)).version == 90
    with psycopg.connect(url, autocommit=True) as c:
        # release 90's TimescaleDB jobs run on their own schedule: its purge job, once run, set
        # a raw horizon that kept March's hours out of its tiers (the fault issue 15 fixed),
        # whenever it beat the tiers job below. The test condenses release 90 itself.
        if c.execute("SELECT timescaledb FROM _measure.install_info").fetchone()[0]:
            c.execute("SELECT alter_job(job_id, scheduled => false) FROM timescaledb_information.jobs"
                      " WHERE proc_schema = '_measure'")
    load_as_release_90(url)
    days = [START.date(), (START + timedelta(hours=HOURS)).date()]
    windows = [(START, START + timedelta(hours=HOURS)), (START + timedelta(minutes=97), START + timedelta(hours=3, minutes=1))]
    with psycopg.connect(url) as c:
        assert c.execute("SELECT count(*) FROM _measure.tier_dirty").fetchone() == (0,)
        n_records = c.execute("SELECT count(*) FROM _measure.interval_record").fetchone()[0]
        before = snapshot(c, "\\DEMO", days, windows, copies="_measure.counter_copy")
        old_columns = tier_columns(c)   # later releases append columns to the tier views
    assert n_records > 100_000 and len(before["counter_copy"]) > n_records
    assert all(before[k] for k in ("cpu_hour", "process_summary[0]", "discopen_summary[0]", "terminal_summary[0]",
                                   "transaction_resource[0]", "cpu_shift", "cpu_month"))

    result = schema.apply(url, mode=MODE)
    assert "101-interval-runs-migrate.sql" in result.applied and result.version == schema.load_plan().code_version
    with psycopg.connect(url) as c:
        assert c.execute("SELECT to_regclass('_measure.counter_copy'), to_regclass('_measure.interval_record')::text"
                         ).fetchone() == (None, "_measure.interval_record")       # a table no more: the view
        runs, intervals = c.execute("SELECT count(*), sum(n) FROM _measure.interval_run").fetchone()
        assert intervals == n_records and runs < n_records / 30
        after = snapshot(c, "\\DEMO", days, windows, columns=old_columns)
        assert differences(before, after) == []
        # condensing everything again from the runs changes nothing either
        c.execute("SELECT _measure.recondense(system_id, %s, %s) FROM _measure.system",
                  (START, START + timedelta(hours=HOURS)))
        assert differences(before, snapshot(c, "\\DEMO", days, windows, columns=old_columns)) == []


OLD_SCHEMA_130 = Path(__file__).resolve().parents[1] / "fixtures" / "schema-130"
RUN_KEY = "ORDER BY measurement_id, entity_id, record_at, from_at"


def load_as_release_130(url: str, spool: Path) -> None:
    """Six hours of the demo node (the same span across the daylight-saving change), written as
    release 130's collector wrote them (runs by binary COPY, entities, extra copies: the
    writer's rows have not changed since) and condensed by release 130's own code."""
    topo = load_node("demo")
    start_us = int(START.timestamp()) * SECOND
    with psycopg.connect(url) as c:
        sid = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) VALUES (%s, %s, %s)"
                        " RETURNING system_id", (topo.system_name, topo.system_number, topo.time_zone)).fetchone()[0]
        c.execute("INSERT INTO _measure.collector_state (collector_id, system_id, node, seed, step_us, epoch_at)"
                  " VALUES ('upgrade', %s, 'demo', 11, 60000000, now())", (sid,))
        c.execute("INSERT INTO _measure.measurement (system_id, name, contab, state) VALUES (%s, 'DEFAULT', '{}',"
                  " 'running')", (sid,))
    node = Node(topo, "demo", seed=11, start_us=start_us, catalog=CAT, step_us=60 * SECOND)
    pipe = Pipeline(CAT, node.tables, sid)
    mon = Measmon(node, pipe.on_copy, catalog=CAT, on_state=lambda *a: None)
    mon.add(Measurement(1, "DEFAULT", default_contab(topo), start_us=start_us, interval_us=60 * SECOND))
    writer = Writer(url, "upgrade", spool, 1 << 30, condense=False)
    for h in range(1, HOURS + 1):
        mon.run_until(start_us + h * 3600 * SECOND)
        sl = pipe.take(start_us + h * 3600 * SECOND)
        sl.control.clear()
        assert writer.flush(sl)
    writer.close()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SELECT _measure.condense(NULL, 100000)")
        c.execute("SELECT _measure.condense_pending_months()")


def test_upgrade_from_130_stores_runs_inline(fresh_database, tmp_path) -> None:
    """Release 130 → today (schema/220-runs-inline.sql): the runs' counters are kept in their
    row, compressed, with every value, copy, tier and report as before; on plain PostgreSQL the
    existing runs are rewritten in place (no counters left in TOAST)."""
    url = fresh_database("_upgrade130")
    old = release_90_schema(tmp_path, OLD_SCHEMA_130)
    assert schema.apply(url, mode=MODE, schema_dir=old).version == 130
    load_as_release_130(url, tmp_path / "spool")
    days = [START.date(), (START + timedelta(hours=HOURS)).date()]
    windows = [(START, START + timedelta(hours=HOURS)), (START + timedelta(minutes=97), START + timedelta(hours=3, minutes=1))]
    runs_sql = f"SELECT md5(string_agg(concat_ws('|', entity_id, from_at, n, counters, base, tail, nonzero), ',' {RUN_KEY}))" \
               " FROM _measure.interval_run"
    with psycopg.connect(url) as c:
        runs_before = c.execute(runs_sql).fetchone()[0]
        before = snapshot(c, "\\DEMO", days, windows)
        old_columns = tier_columns(c)
        plain = c.execute("SELECT relkind = 'p' FROM pg_class WHERE oid = '_measure.interval_run'::regclass").fetchone()[0]
        toast_before = c.execute(TOASTED_RUNS).fetchone()[0]
    assert runs_before and all(before[k] for k in ("cpu_hour", "process_summary[0]", "discopen_summary[0]", "cpu_shift"))
    assert toast_before > 0   # release 130 moved the runs' counters out of line

    result = schema.apply(url, mode=MODE)
    assert "220-runs-inline.sql" in result.applied
    storage_sql = ("SELECT array_agg(DISTINCT a.attstorage::text) FROM pg_attribute a"
                   " WHERE a.attrelid IN (SELECT p.part FROM _measure.run_parts() p"
                   "                      UNION ALL SELECT '_measure.interval_run'::regclass)"
                   "   AND a.attname IN ('counters', 'base', 'tail')")
    with psycopg.connect(url) as c:
        assert c.execute(runs_sql).fetchone()[0] == runs_before
        # plain PostgreSQL: stored in the row, rewritten in place; TimescaleDB: left to its compression
        assert c.execute(storage_sql).fetchone()[0] == (["m"] if plain else ["x"])
        assert c.execute(TOASTED_RUNS).fetchone()[0] == (0 if plain else toast_before)
        assert differences(before, snapshot(c, "\\DEMO", days, windows, columns=old_columns)) == []
        c.execute("SELECT _measure.recondense(system_id, %s, %s) FROM _measure.system",
                  (START, START + timedelta(hours=HOURS)))
        assert differences(before, snapshot(c, "\\DEMO", days, windows, columns=old_columns)) == []
        # a new partition keeps the runs in the row too
        c.execute("SELECT _measure.run_partitions_for(%s, %s)", (START + timedelta(days=3), START + timedelta(days=3)))
        assert c.execute(storage_sql).fetchone()[0] == (["m"] if plain else ["x"])


# runs whose counters live out of line, in TOAST
TOASTED_RUNS = "SELECT count(*) FROM _measure.interval_run WHERE pg_column_toast_chunk_id(counters) IS NOT NULL"
