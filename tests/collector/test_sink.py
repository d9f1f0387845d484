"""Writing copies and interval records: exact values, idempotence, spool and replay."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from collector.measure.contab import ContabBuilder
from collector.measure.measmon import COPY_INTERVAL, COPY_START, Measmon, Measurement
from collector.sink import Pipeline, SpoolFull, Writer
from collector.slice import Slice, SpoolFileError, decode, encode
from core.catalog import load_catalog
from core.entities import entity_id, entity_key
from tests.collector.measure.fakes import SECOND, FakeNode
from tests.engine import MODE

CAT = load_catalog()
T0 = 1_700_000_000 * SECOND  # 2023-11-14 22:13:20 UTC


@pytest.fixture
def target(fresh_database) -> str:
    from core import schema

    url = fresh_database("_sink")
    schema.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        sid = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                        "VALUES ('\\SINK', 9, 'UTC') RETURNING system_id").fetchone()[0]
        c.execute("INSERT INTO _measure.collector_state (collector_id, system_id, node, seed, step_us, epoch_at) "
                  "VALUES ('sink', %s, 'fake', 1, 1000000, _measure.us_to_timestamptz(%s))", (sid, T0))
    return url


def run(url: str, spool: Path, *, until_s: int = 30, max_bytes: int = 1 << 30):
    node = FakeNode(n_cpus=2, start_us=T0)
    with psycopg.connect(url) as c:
        sid = c.execute("SELECT system_id FROM _measure.system WHERE system_name = '\\SINK'").fetchone()[0]
    pipe = Pipeline(CAT, node.tables, sid)
    mon = Measmon(node, pipe.on_copy, catalog=CAT)
    b = ContabBuilder()
    b.add("cpu", None)
    b.add("process", None)
    mon.add(Measurement(1, "M", b.build(), start_us=T0, interval_us=10 * SECOND))
    writer = Writer(url, "sink", spool, max_bytes)
    return node, mon, pipe, writer


def slices(mon, pipe, until_s: int, step_s: int = 10):
    out = []
    for t in range(step_s, until_s + 1, step_s):
        mon.run_until(T0 + t * SECOND)
        out.append(pipe.take(T0 + t * SECOND))
    return out


def test_rows_round_trip_exactly(target: str, tmp_path: Path) -> None:
    node, mon, pipe, writer = run(target, tmp_path)
    for sl in slices(mon, pipe, 30):
        assert writer.flush(sl)
    with psycopg.connect(target) as c:
        rows = c.execute(
            "SELECT e.key, r.copy_kind, _measure.timestamptz_to_us(r.copy_at) - %s, r.counters "
            "FROM measure.counter_copy r JOIN _measure.entity e USING (entity_id) "
            "WHERE r.type_code = 1 ORDER BY 3, 1", (T0,)).fetchall()
        busy = CAT.entity("cpu").index("cpu_busy_time")
        assert [(k, kind, t // SECOND, v[busy]) for k, kind, t, v in rows] == [
            ("cpu=0", COPY_START, 0, 0), ("cpu=1", COPY_START, 0, 0),
            ("cpu=0", COPY_INTERVAL, 10, 5 * SECOND), ("cpu=1", COPY_INTERVAL, 10, 5 * SECOND),
            ("cpu=0", COPY_INTERVAL, 20, 10 * SECOND), ("cpu=1", COPY_INTERVAL, 20, 10 * SECOND),
            ("cpu=0", COPY_INTERVAL, 30, 15 * SECOND), ("cpu=1", COPY_INTERVAL, 30, 15 * SECOND),
        ]
        iv = c.execute(
            "SELECT delta_us, counters[%s], counters[%s] FROM _measure.interval_record "
            "WHERE type_code = 1 ORDER BY from_at, entity_id",
            (busy + 1, CAT.entity("cpu").index("cpu_qtime") + 1)).fetchall()
        assert iv == [(10 * SECOND, 5 * SECOND, 20 * SECOND)] * 6
        # the entity ids are the documented hash of system, type and identifying fields
        sid = c.execute("SELECT system_id FROM _measure.system WHERE system_name = '\\SINK'").fetchone()[0]
        ids = {k: i for i, k in c.execute("SELECT entity_id, key FROM _measure.entity WHERE type_code = 1")}
        assert ids["cpu=0"] == entity_id(sid, 1, entity_key(("cpu",), {"cpu": 0}))
        assert c.execute("SELECT _measure.timestamptz_to_us(durable_until) FROM _measure.collector_state").fetchone()[0] == T0 + 30 * SECOND


def counts(url: str) -> tuple[int, int]:
    with psycopg.connect(url) as c:
        return (c.execute("SELECT count(*) FROM measure.counter_copy").fetchone()[0],
                c.execute("SELECT count(*) FROM _measure.interval_record").fetchone()[0])


def test_a_slice_written_twice_is_stored_once(target: str, tmp_path: Path) -> None:
    node, mon, pipe, writer = run(target, tmp_path)
    sls = slices(mon, pipe, 20)
    for sl in sls:
        writer.flush(sl)
    once = counts(target)
    assert once == (4 * 3, 4 * 2)
    writer.flush(sls[-1])                 # a retry: below the watermark, skipped
    writer.durable_until_us = -1          # a run that died before recording its watermark
    writer.flush(sls[-1])                 # primary-key clash → ON CONFLICT DO NOTHING
    assert counts(target) == once


def test_outage_spools_and_replays_in_order(target: str, tmp_path: Path) -> None:
    node, mon, pipe, writer = run(target, tmp_path / "spool")
    sls = slices(mon, pipe, 50)
    assert writer.flush(sls[0])
    writer.url = "postgresql://nobody@127.0.0.1:1/measuredb"  # the database goes away
    writer.close()
    assert not writer.flush(sls[1])
    assert not writer.flush(sls[2])
    assert [p.name.split("-")[0] for p in writer.spooled()] == ["000000000000", "000000000001"]
    writer.url = target                                        # … and comes back,
    assert not writer.flush(sls[3])                            # tried again only after the backoff
    assert len(writer.spooled()) == 3
    assert writer.drain(timeout_s=10)                          # the backoff passes: replayed in order
    assert writer.spooled() == [] and not writer.down
    assert writer.flush(sls[4])
    assert counts(target) == (4 * 6, 4 * 5)
    with psycopg.connect(target) as c:
        tos = c.execute("SELECT DISTINCT _measure.timestamptz_to_us(to_at) - %s FROM _measure.interval_record ORDER BY 1", (T0,)).fetchall()
    assert [t // SECOND for (t,) in tos] == [10, 20, 30, 40, 50]


def deadlocks(url: str, times: int) -> None:
    """The next `times` writes of entities fail as a deadlock with another writer does (the
    server raises 40P01 and rolls the transaction back)."""
    with psycopg.connect(url) as c:
        c.execute("CREATE SEQUENCE public.deadlocks")
        c.execute(f"""CREATE FUNCTION public.deadlock() RETURNS trigger LANGUAGE plpgsql AS $$
                      BEGIN
                          IF nextval('public.deadlocks') <= {times} THEN
                              RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01';
                          END IF;
                          RETURN NULL;
                      END $$""")
        c.execute("CREATE TRIGGER deadlock BEFORE INSERT ON _measure.entity"
                  " FOR EACH STATEMENT EXECUTE FUNCTION public.deadlock()")


def test_a_slice_rolled_back_by_a_deadlock_is_written_again_at_once(target: str, tmp_path: Path, caplog) -> None:
    node, mon, pipe, writer = run(target, tmp_path / "spool")
    sls = slices(mon, pipe, 20)
    deadlocks(target, 2)
    with caplog.at_level("WARNING"):
        assert writer.flush(sls[0]) and writer.flush(sls[1])
    assert writer.spooled() == [] and not writer.down
    assert counts(target) == (4 * 3, 4 * 2)
    conflicts = [r.getMessage() for r in caplog.records if "conflict with another writer" in r.getMessage()]
    assert len(conflicts) == 2 and "deadlock detected" in conflicts[0] and "(2 of 5)" in conflicts[0]
    assert not any("unreachable" in r.getMessage() for r in caplog.records)


def test_a_slice_that_keeps_conflicting_is_spooled_and_not_called_an_outage(target: str, tmp_path: Path,
                                                                            caplog) -> None:
    node, mon, pipe, writer = run(target, tmp_path / "spool")
    sls = slices(mon, pipe, 20)
    deadlocks(target, 5)
    with caplog.at_level("WARNING"):
        assert not writer.flush(sls[0])
    assert len(writer.spooled()) == 1
    assert any("after 5 conflicts with other writers" in r.getMessage() for r in caplog.records)
    assert not any("unreachable" in r.getMessage() for r in caplog.records)
    assert writer.drain(timeout_s=10)  # the sixth write goes through
    assert writer.flush(sls[1])
    assert counts(target) == (4 * 3, 4 * 2)


AWAY = "postgresql://nobody@127.0.0.1:1/measuredb"


def watermark(url: str) -> int:
    with psycopg.connect(url) as c:
        return c.execute("SELECT _measure.timestamptz_to_us(durable_until) FROM _measure.collector_state"
                         " WHERE collector_id = 'sink'").fetchone()[0]


def test_reconnecting_backs_off_while_the_database_is_away(target: str, tmp_path: Path) -> None:
    node, mon, pipe, writer = run(target, tmp_path / "spool")
    writer.url = AWAY
    tried = []
    real_connect = psycopg.connect
    psycopg.connect = lambda *a, **k: (tried.append(1), real_connect(*a, **k))[1]
    try:
        for sl in slices(mon, pipe, 50):
            assert not writer.flush(sl)
    finally:
        psycopg.connect = real_connect
    assert len(writer.spooled()) == 5
    assert len(tried) == 1                       # five slices, one attempt: the next after 1 s
    assert writer._backoff_s == 1.0
    for expected in (2.0, 4.0, 8.0):             # then 2, 4, 8 … s, capped at backoff_max_s
        writer._next_try = 0.0
        assert not writer.drain(timeout_s=0)
        assert writer._backoff_s == expected


def test_full_spool_raises_when_it_may_not_wait(target: str, tmp_path: Path) -> None:
    node, mon, pipe, writer = run(target, tmp_path / "spool", max_bytes=1)
    writer.url = AWAY
    sls = slices(mon, pipe, 10)
    with pytest.raises(SpoolFull, match=r"spool folder .* is full .*Nothing was dropped"):
        writer.flush(sls[0], wait=False)


def test_full_spool_pauses_until_the_database_answers(target: str, tmp_path: Path, caplog) -> None:
    import threading

    node, mon, pipe, writer = run(target, tmp_path / "spool", max_bytes=1)
    writer.url = AWAY
    sls = slices(mon, pipe, 30)
    threading.Timer(1.5, lambda: setattr(writer, "url", target)).start()   # back in 1.5 s
    for sl in sls:
        assert writer.flush(sl)                  # the first one waits, nothing is dropped
    assert "Collection is paused" in caplog.text and "collection resumed" in caplog.text
    assert counts(target) == (4 * 4, 4 * 3)
    assert writer.spooled() == []


def test_drop_oldest_keeps_the_newest_and_says_so_loudly(target: str, tmp_path: Path, caplog) -> None:
    node, mon, pipe, _ = run(target, tmp_path / "spool")
    writer = Writer(AWAY, "sink", tmp_path / "spool", 1, spool_full="drop-oldest")
    sls = slices(mon, pipe, 40)
    size = len(encode(sls[1]))
    # room for about two slices of intervals, and for the first (its entities and start copies)
    # alone: it is the largest, the more so the more counters the catalogue's records hold
    writer.spool_max_bytes = max(2 * size + 2000, len(encode(sls[0])))
    for sl in sls:
        assert not writer.flush(sl)
    assert writer.dropped_slices == 2 and caplog.text.count("DROPPED") == 2
    writer.url = target
    assert writer.drain(timeout_s=10)
    with psycopg.connect(target) as c:
        tos = c.execute("SELECT DISTINCT _measure.timestamptz_to_us(to_at) - %s"
                        " FROM _measure.interval_record ORDER BY 1", (T0,)).fetchall()
        entities = c.execute("SELECT count(*) FROM _measure.entity").fetchone()[0]
    assert [t // SECOND for (t,) in tos] == [30, 40]   # the intervals ending at 10 and 20 s were dropped
    assert entities == sum(len(sl.entities) for sl in sls) == 4   # their entities were kept
    assert watermark(target) == T0 + 40 * SECOND


def test_a_corrupt_spool_file_is_quarantined_and_the_rest_replays(target: str, tmp_path: Path, caplog) -> None:
    node, mon, pipe, writer = run(target, tmp_path / "spool")
    writer.url = AWAY
    sls = slices(mon, pipe, 30)
    for sl in sls:
        writer.flush(sl)
    bad = writer.spooled()[1]
    bad.write_bytes(b"\x80\x05 this is not a pickled slice")
    writer.url = target
    assert writer.drain(timeout_s=10)
    assert (writer.spool_dir / "quarantine" / bad.name).exists()
    assert f"spool file {bad.name} is unreadable" in caplog.text
    assert counts(target) == (4 + 4 + 4, 4 + 4)  # slices 1 (start + interval copies) and 3 only


def test_the_watermark_never_goes_backwards(target: str, tmp_path: Path) -> None:
    """A replayed slice that ends before what is stored (a measurement's "started" event
    spooled before an outage, replayed after a restart) does not move the watermark back."""
    node, mon, pipe, writer = run(target, tmp_path / "spool")
    for sl in slices(mon, pipe, 30):
        writer.flush(sl)
    assert watermark(target) == T0 + 30 * SECOND
    writer.flush(Slice(until_us=T0 + 10 * SECOND, control=[("started", 1, T0, None)]))
    assert watermark(target) == T0 + 30 * SECOND
    assert writer.durable_until_us == T0 + 30 * SECOND


def test_each_slice_condenses_its_hours_into_the_tiers(target: str, tmp_path: Path) -> None:
    node, mon, pipe, writer = run(target, tmp_path)
    for sl in slices(mon, pipe, 30):
        writer.flush(sl)
    with psycopg.connect(target) as c:
        rows = c.execute("SELECT cpu, busy_avg, qlen_avg FROM measure.cpu_hour ORDER BY cpu").fetchall()
        assert [(cpu, float(b), float(q)) for cpu, b, q in rows] == [(0, 50.0, 2.0), (1, 50.0, 2.0)]
        assert c.execute("SELECT count(*) FROM _measure.tier_dirty").fetchone()[0] == 0


def test_the_partitions_of_marked_hours_are_analysed_on_the_columns_condensing_reads(target: str,
                                                                                   tmp_path: Path) -> None:
    """Before a backfill condenses the hours it marked, the run partitions (chunks) holding
    them get statistics (_measure.analyze_dirty_runs; planned without, a fresh ref16 hour
    took 3-4 s: issue 31): of the columns condensing filters and joins on, not the counter
    arrays; no partition when no hour is marked, or for another system."""
    node, mon, pipe, writer = run(target, tmp_path)
    writer.condense = False  # marked only, as a backfill's slices are
    for sl in slices(mon, pipe, 30):
        writer.flush(sl)
    with psycopg.connect(target, autocommit=True) as c:
        sid = c.execute("SELECT system_id FROM _measure.system WHERE system_name = '\\SINK'").fetchone()[0]
        parts = [p for (p,) in c.execute("SELECT part FROM _measure.run_parts()")]
        assert len(parts) == 1 and c.execute("SELECT count(*) FROM _measure.tier_dirty").fetchone() == (1,)
        counts = "SELECT pg_stat_get_analyze_count(%s::regclass), pg_stat_get_autoanalyze_count(%s::regclass)"
        assert c.execute(counts, (parts[0], parts[0])).fetchone()[0] == 0
        assert c.execute("SELECT _measure.analyze_dirty_runs(%s::smallint)", (sid + 1,)).fetchone() == (0,)
        assert c.execute("SELECT _measure.analyze_dirty_runs(%s::smallint)", (sid,)).fetchone() == (1,)
        analysed, auto = c.execute(counts, (parts[0], parts[0])).fetchone()
        assert analysed == 1
        columns = {a for (a,) in c.execute("SELECT s.attname FROM pg_stats s JOIN pg_class t ON t.relname = s.tablename"
                                           " JOIN pg_namespace n ON n.oid = t.relnamespace AND n.nspname = s.schemaname"
                                           " WHERE t.oid = %s::regclass", (parts[0],))}
        assert {"system_id", "type_code", "measurement_id", "entity_id", "record_at", "from_at"} <= columns
        assert auto > 0 or "counters" not in columns  # (autovacuum's own ANALYZE takes every column)
        c.execute("SELECT _measure.condense(%s::smallint, 1000000, false)", (sid,))
        assert c.execute("SELECT _measure.analyze_dirty_runs(%s::smallint)", (sid,)).fetchone() == (0,)
        assert c.execute(counts, (parts[0], parts[0])).fetchone()[0] == 1


# ---------------------------------------------------------------- the spool holds data, never code

class _Boom:
    def __reduce__(self):
        import os
        return (os.system, ("touch /tmp/measuredb-spool-pwned",))


def test_a_crafted_spool_file_is_quarantined_unread_and_runs_nothing(target: str, tmp_path: Path, caplog) -> None:
    """A pickle that would run os.system, dropped into the spool by someone who could write it:
    quarantined as not a slice, never unpickled; the genuine slices replay."""
    import pickle

    pwned = Path("/tmp/measuredb-spool-pwned")
    pwned.unlink(missing_ok=True)
    node, mon, pipe, writer = run(target, tmp_path / "spool")
    writer.url = AWAY
    for sl in slices(mon, pipe, 30):
        writer.flush(sl)
    evil = writer.spool_dir / "000000000000-0.slice"
    evil.write_bytes(pickle.dumps(_Boom()))
    writer.url = target
    assert writer.drain(timeout_s=10)
    assert not pwned.exists()
    assert (writer.spool_dir / "quarantine" / evil.name).exists()
    assert "not a measuredb slice" in caplog.text


def test_a_slice_round_trips_and_any_change_is_refused() -> None:
    sl = Slice(until_us=T0 + 5, entities=[(7, 1, "cpu=0", '{"cpu": 0}', 0, T0)], runs=[b"\x00\x01", b"abc"],
               extras=[b"x" * 10], n_runs=2, n_intervals=3, n_extras=1, from_min_us=T0, from_max_us=T0 + 1,
               pack_hours=[T0], control=[("started", 1, T0, None), ("stopped", 1, T0 + 5, {"entities": {"cpu": 2}})])
    data = encode(sl)
    assert decode(data) == sl
    for cut in (data[:-1], data[:20], b"MDBSLICE" + data[8:-32] + bytes(32), data.replace(b"cpu=0", b"cpu=1"),
                b"PICKLE!!" + data[8:]):
        with pytest.raises(SpoolFileError):
            decode(cut)


def test_the_spool_folder_is_private_and_one_others_can_write_is_refused(tmp_path: Path) -> None:
    made = tmp_path / "new" / "spool"
    Writer(AWAY, "sink", made, 1 << 20)
    assert made.stat().st_mode & 0o777 == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(PermissionError, match="may be written by others .*chmod 700"):
        Writer(AWAY, "sink", shared, 1 << 20)
