"""Tests for the MEASCOM interpreter (collector.meascom.interpreter, listing) on a real database."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import psycopg
import pytest

from collector.meascom.interpreter import MeascomError, Session
from collector.measure.contab import Contab
from core.catalog import load_catalog
from tests.collector.meascom.test_parser import FIGURE_3, FIGURE_4

TZ = ZoneInfo("Europe/Berlin")
NOW = datetime(2025, 11, 7, 9, 0, tzinfo=TZ)  # 7 Nov 2025 = Julian (ordinal) day 311
CAT = load_catalog()


def session(url, tmp_path=None, **kw) -> Session:
    kw.setdefault("clock", lambda: NOW)
    return Session(url, cwd=tmp_path, **kw)


def measurement_rows(c):
    return c.execute("SELECT measurement_id, name, state, start_at, stop_at, interval_us, contab,"
                     " source FROM _measure.measurement ORDER BY measurement_id").fetchall()


# ------------------------------------------------------------------ helpers for stored data

_ENTITY_SEQ = iter(range(1000, 10**9))


def add_entity(c, entity: str, ids: dict) -> int:
    ent = CAT.entity(entity)
    eid = next(_ENTITY_SEQ)
    key = "|".join(f"{f}={ids.get(f, '')}" for f in ent.id_fields)
    c.execute("INSERT INTO _measure.entity (entity_id, system_id, type_code, key, ids, cpu,"
              " first_seen_at) VALUES (%s, 1, %s, %s, %s, %s, %s)",
              (eid, ent.code, key, psycopg.types.json.Jsonb(ids), ids.get("cpu"), NOW))
    return eid


def add_record(c, mid: int, eid: int, entity: str, from_at: datetime, to_at: datetime,
               values: dict[str, int], record_at: datetime | None = None) -> None:
    ent = CAT.entity(entity)
    counters = [0] * len(ent.counters)
    for k, v in values.items():
        counters[ent.index(k)] = v
    c.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at,"
              " from_at, to_at, delta_us, closing_kind, system_id, type_code, cpu, counters)"
              " VALUES (%s, %s, %s, %s, %s, %s, 3, 1, %s, 0, %s)",
              (mid, eid, record_at or NOW - timedelta(days=1), from_at, to_at,
               int((to_at - from_at) / timedelta(microseconds=1)), ent.code, counters))


def hours(day: datetime, first: int, last: int, minute: int = 5):
    """Hourly intervals hh:mm - hh+1:mm for hh in first..last."""
    base = day.replace(hour=0, minute=minute, second=0, microsecond=0)
    return [(base + timedelta(hours=h), base + timedelta(hours=h + 1)) for h in range(first, last + 1)]


CPU_HOUR = {"CPU-BUSY-TIME": 1_800_000_000, "CPU-QTIME": 900_000_000, "DISPATCHES": 7200,
            "TRANSACTIONS": 1000, "RESPONSE-TIME": 250_000_000, "ENDING-FREE-CIDS": 17}


# ------------------------------------------------------------------ Figure 3 and Figure 4


def test_figure_3_creates_the_measurement(db, url, tmp_path):
    s = session(url, tmp_path)
    out = s.execute(FIGURE_3)
    [(mid, name, state, start, stop, interval, contab, source)] = measurement_rows(db)
    assert (name, state, interval) == ("CPLNDAY1", "scheduled", 3_600_000_000)
    # FROM 00:05 at 09:00 means today 00:05 local (already past: it starts at once)
    assert start == datetime(2025, 11, 7, 0, 5, tzinfo=TZ)
    assert stop == datetime(2025, 11, 8, 0, 5, tzinfo=TZ)
    c = Contab.model_validate(contab)
    assert [(d.type, d.fields, d.exclude) for d in c.descriptors] == [
        ("CPU", {}, False), ("DISC", {}, False), ("LINE", {}, False),
        ("PROCESS", {"pin": "SYSTEM"}, False),
        ("USERDEF", {"program_file_name": "$PROGS.SERVER1.*"}, False)]
    assert [(x.name, x.type, x.process_spec) for x in c.counters] == [
        ("RESP-TIME", "QUEUE", "$PROGS.SERVER1.*"), ("THROUGHPUT", "ACCUM", "$PROGS.SERVER1.*")]
    assert "START MEASUREMENT CPLNDAY1," in source and "ADD COUNTER THROUGHPUT" in source
    assert f"Measurement CPLNDAY1 (id {mid}) scheduled" in out
    assert "07 NOV 2025, 00:05:00 to 08 NOV 2025, 00:05:00 (Europe/Berlin)" in out
    assert s.state.current == mid  # implicit ADD MEASUREMENT


def test_figure_4_writes_structured_records(db, url, tmp_path):
    s = session(url, tmp_path)
    s.execute(FIGURE_3)
    mid = s.state.current
    day = NOW
    ents = {"CPU": [add_entity(db, "cpu", {"cpu": 0}), add_entity(db, "cpu", {"cpu": 1})],
            "DISC": [add_entity(db, "disc", {"cpu": 0, "device_name": "$DATA1", "pin": 5,
                                             "path": "P"})],
            "LINE": [add_entity(db, "line", {"device_name": "$LINE1", "cpu": 2, "pin": 9})],
            "PROCESS": [add_entity(db, "process", {"cpu": 0, "pin": 3, "process_name": "$MON",
                                                   "program_file_name": "$SYSTEM.SYSTEM.MON",
                                                   "priority": 201})],
            "USERDEF": [add_entity(db, "userdef", {"cpu": 1, "pin": 40, "process_name": "$S1",
                                                   "program_file_name": "$PROGS.SERVER1.SRV",
                                                   "name": "THROUGHPUT", "index": 0})]}
    for etype, eids in ents.items():
        for eid in eids:
            for f, t in hours(day, 0, 23):  # 00:05-01:05 … 23:05-00:05 next day
                first_counter = CAT.entity(etype).counters[0].measure_name
                add_record(db, mid, eid, etype, f, t, {first_counter: f.hour + 1})
    out = s.execute(FIGURE_4)
    assert out.splitlines() == [
        "LIST CPU: 2 structured records written, LOADID DT31123",
        "LIST DISC: 1 structured record written, LOADID DT31123",
        "LIST LINE: 1 structured record written, LOADID DT31123",
        "LIST PROCESS: 1 structured record written, LOADID DT31123",
        "LIST USERDEF: 1 structured record written, LOADID DT31123"]
    rows = db.execute("SELECT loadid, type_code, measurement_id, entity_id, from_at, to_at,"
                      " delta_us, counters[1] FROM _measure.structured_record"
                      " ORDER BY structured_id").fetchall()
    assert len(rows) == 6
    for loadid, _code, m, _eid, f, t, delta, first in rows:
        # FROM 23:00 FOR 1 HOURS over copies at hh:05: the hour 23:05-00:05 (its value: 24)
        assert (loadid, m, f, t, delta, first) == (
            "DT31123", mid, datetime(2025, 11, 7, 23, 5, tzinfo=TZ),
            datetime(2025, 11, 8, 0, 5, tzinfo=TZ), 3_600_000_000, 24)
    assert [r[3] for r in rows] == [e for k in ("CPU", "DISC", "LINE", "PROCESS", "USERDEF")
                                    for e in ents[k]]
    # listing again appends: duplicates are not removed (MEASURE's rule)
    s.execute("LIST CPU *, LOADID DT31123, FROM 23:00, FOR 1 HOURS")
    assert db.execute("SELECT count(*) FROM _measure.structured_record").fetchone()[0] == 8


def test_runs_the_same_as_the_api_role(db, url, tmp_path):
    """The interpreter reads only measure.* views and writes only through measure.*
    functions, so it needs no privilege on _measure: run it as measure_api."""
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SET ROLE measure_api")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("SELECT 1 FROM _measure.measurement")
        s = Session(c, cwd=tmp_path, clock=lambda: NOW)
        s.execute(FIGURE_3)
        mid = s.state.current
        eid = add_entity(db, "cpu", {"cpu": 0})
        for f, t in hours(NOW, 22, 23):
            add_record(db, mid, eid, "cpu", f, t, CPU_HOUR)
        out = s.execute("LIST CPU *, LOADID DT31123, FROM 23:00, FOR 1 HOURS")
        assert out == "LIST CPU: 1 structured record written, LOADID DT31123"
        lines = s.execute("SET REPORT TOTALS INCLUDE\nLIST CPU 0, FROM 23:00, FOR 1 HOURS").splitlines()
        assert lines[3] == "  from 07 Nov 2025 23:05:00  to 08 Nov 2025 00:05:00  elapsed 3600.000 s"
        assert lines[4].split() == ["CPU-BUSY-TIME", "50.00", "%"]
        assert "TOTAL CPU" in lines
        status = s.execute("STATUS MEASUREMENT CPLNDAY1")
        assert "    CPU             1 entities        2 records, last to 08 NOV 2025, 00:05:00" in status
        assert "== entities measured: CPU 1" in s.execute("INFO CPLNDAY1")
        s.execute("STOP MEASUREMENT CPLNDAY1")
    rows = db.execute("SELECT loadid, entity_id, from_at, counters[1]"
                      "  FROM _measure.structured_record").fetchall()
    assert rows == [("DT31123", eid, datetime(2025, 11, 7, 23, 5, tzinfo=TZ), 1_800_000_000)]
    assert db.execute("SELECT stop_at FROM _measure.measurement").fetchone()[0] == NOW


# ------------------------------------------------------------------ parse first, change nothing


def test_bad_obey_file_changes_nothing(db, url, tmp_path):
    (tmp_path / "good").write_text("ADD CPU *\n")
    (tmp_path / "bad").write_text("ADD DISC *\nOBEY good\nSTART MEASUREMENT X1\nADD CPU 16\n")
    s = session(url, tmp_path)
    with pytest.raises(MeascomError) as ei:
        s.execute("ADD PROCESS *\nOBEY bad\n")
    e = ei.value
    assert (e.file, e.line, e.column, e.word, e.syntax) == ("bad", 4, 9, "16", True)
    assert "16 is out of range; expected a CPU number 0-15 or *" in str(e)
    assert str(e).startswith("bad: line 4, column 9: ")
    assert measurement_rows(db) == [] and s.contab == Contab()


def test_runtime_error_undoes_the_whole_text(db, url, tmp_path):
    s = session(url, tmp_path)
    s.execute("ADD CPU *\nSTART MEASUREMENT A1")
    with pytest.raises(MeascomError) as ei:
        s.execute("ADD DISC *\nSET REPORT RATE OFF\nSTART MEASUREMENT B1\nSTART MEASUREMENT A1")
    assert (ei.value.line, ei.value.column, ei.value.syntax) == (4, 1, False)
    assert "measurement A1 is already scheduled" in str(ei.value)
    assert "STOP MEASUREMENT A1 first" in str(ei.value)
    assert [r[1] for r in measurement_rows(db)] == ["A1"]  # B1 rolled back
    assert [d.type for d in s.contab.descriptors] == ["CPU"]  # session state restored
    assert s.state.report.rate == "ON"


def test_contab_errors_are_found_before_anything_runs(db, url, tmp_path):
    s = session(url, tmp_path)
    with pytest.raises(MeascomError) as ei:
        s.execute("ADD CPU *\nSTART MEASUREMENT A1\nDELETE COUNTER NOPE")
    assert (ei.value.line, ei.value.column) == (3, 1)
    assert "no counter NOPE to delete" in str(ei.value)
    assert measurement_rows(db) == []


def test_obey_nesting_limit_and_missing_file(db, url, tmp_path):
    (tmp_path / "LOOP").write_text("OBEY LOOP\n")
    s = session(url, tmp_path)
    with pytest.raises(MeascomError, match="OBEY files nest at most 8 deep"):
        s.execute("OBEY loop")  # Guardian names are case-insensitive
    with pytest.raises(MeascomError, match="OBEY file 'NOFILE' not found") as ei:
        s.execute("\n  OBEY NOFILE")
    assert (ei.value.line, ei.value.column) == (2, 3)
    (tmp_path / "d1").write_text("OBEY d2\n")
    (tmp_path / "d2").write_text('OBEY "sub/last.txt"\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "last.txt").write_text("ADD TMF *\n")
    s.execute("OBEY d1")
    assert [d.type for d in s.contab.descriptors] == ["TMF"]


# ------------------------------------------------------------------ configuration commands


def test_add_delete_exclusion_and_counters(db, url, tmp_path):
    s = session(url, tmp_path)
    s.execute("""ADD CPU *
DELETE CPU 6
ADD DISC $DATA1, $DATA2
DELETE DISC $DATA2
VOLUME $PROGS.SERVER1
ADD USERDEF SRV
ADD COUNTER HITS, PROCESS SRV, ACCUM, ARRAY 3
ADD COUNTER WAITS, PROCESS SRV, BUSY
DELETE COUNTER WAITS""")
    c = s.contab
    assert [(d.type, d.fields, d.exclude) for d in c.descriptors] == [
        ("CPU", {}, False), ("CPU", {"cpu": 6}, True), ("DISC", {"device_name": "$DATA1"}, False),
        ("USERDEF", {"program_file_name": "$PROGS.SERVER1.SRV"}, False)]
    assert [(x.name, x.elements, x.process_spec) for x in c.counters] == [
        ("HITS", 4, "$PROGS.SERVER1.SRV")]
    assert c.matches("CPU", {"cpu": 5}) and not c.matches("CPU", {"cpu": 6})
    with pytest.raises(MeascomError, match="counter HITS already exists"):
        s.execute("ADD COUNTER HITS, PROCESS SRV, ACCUM")


def test_start_times_for_to_interval_and_errors(db, url, tmp_path):
    s = session(url, tmp_path)
    s.execute("ADD CPU *\nSTART MEASUREMENT NOW1")
    s.execute("START MEASUREMENT T1, FROM 8 NOV 2025, 22:00, TO 9 NOV, 06:30, INTERVAL 15 MINUTES")
    s.execute("START MEASUREMENT F1, FROM 10:00, FOR 90 MINUTES")
    rows = {r[1]: r for r in measurement_rows(db)}
    assert rows["NOW1"][3:6] == (NOW, None, None)
    assert rows["T1"][3:6] == (datetime(2025, 11, 8, 22, 0, tzinfo=TZ),
                               datetime(2025, 11, 9, 6, 30, tzinfo=TZ), 900_000_000)
    assert rows["F1"][3:5] == (datetime(2025, 11, 7, 10, 0, tzinfo=TZ),
                               datetime(2025, 11, 7, 11, 30, tzinfo=TZ))
    with pytest.raises(MeascomError, match="TO 07 NOV 2025, 06:00:00 is not after") as ei:
        s.execute("START MEASUREMENT X2, FROM 22:00, TO 06:00")
    assert (ei.value.line, ei.value.column) == (1, 38)  # the TO time
    with pytest.raises(MeascomError, match="already past"):
        s.execute("START MEASUREMENT X3, FROM 01:00, FOR 1 HOURS")
    with pytest.raises(MeascomError, match="mutually exclusive") as ei:
        s.execute("START MEASUREMENT X4, FOR 1 HOURS, TO 23:00")
    assert ei.value.syntax
    empty = session(url, tmp_path)
    with pytest.raises(MeascomError, match="nothing to measure"):
        empty.execute("START MEASUREMENT X5")
    with pytest.raises(MeascomError, match="no measurement named"):
        empty.execute("STOP MEASUREMENT")


def test_stop_assume_and_status(db, url, tmp_path):
    s = session(url, tmp_path, answer_timeout=0.2)
    s.execute("ADD CPU *\nASSUME MEASUREMENT $PERF.DATA.JUN04\nSTART")
    [(mid, name, state, *_)] = measurement_rows(db)
    assert (name, state) == ("JUN04", "scheduled")
    status = s.execute("STATUS MEASUREMENT")
    assert status.splitlines()[0] == f"MEASUREMENT JUN04 (id {mid}) on \\DEMO: scheduled"
    assert "configuration: descriptors: CPU 1" in status
    assert "collector: the collector of \\DEMO is not answering (no heartbeat ever)" in status
    sub = s.execute("STATUS MEASSUBSYS")
    assert "collector: none has run for this system" in sub and "live measurements: 1" in sub
    out = s.execute("STOP MEASUREMENT JUN04")
    assert out == f"Measurement JUN04 (id {mid}) stops at 07 NOV 2025, 09:00:00"
    # started at NOW and stopped at NOW: it never ran
    assert measurement_rows(db)[0][2] == "stopped"
    with pytest.raises(MeascomError, match="measurement JUN04 is not live"):
        s.execute("STOP MEASUREMENT JUN04")
    s.execute("START MEASUREMENT JUN04, FROM 08:00")  # the name is free again
    s.clock = lambda: NOW + timedelta(hours=1)
    s.execute("STOP MEASUREMENT JUN04")
    assert measurement_rows(db)[1][4] == NOW + timedelta(hours=1)


def test_info_round_trip(db, url, tmp_path):
    s = session(url, tmp_path)
    s.execute("""VOLUME $PROGS.SERVER1
ADD CPU *
DELETE CPU 6
ADD PROCESS $MON(2,*), SYSTEM-PROCESSES, "/usr/bin/srv"
ADD DISC $DATA1(3)
ADD TERMINAL $LINE1.#T1
ADD FILE $DATA1.SALES.*
ADD SYSTEM \\EAST
ADD USERDEF SRV(1,40)
ADD COUNTER HITS, PROCESS SRV, ACCUM, ARRAY 3
ADD COUNTER QLEN, PROCESS $S1, QUEUE
START MEASUREMENT ORIG, FROM 10:00, FOR 2 HOURS, INTERVAL 90 SECONDS""")
    info = s.execute("INFO /OUT cfg/ ORIG")
    assert info == "INFO written to CFG"
    text = (tmp_path / "CFG").read_text()  # OUT names are Guardian names (upper case)
    assert text == s.execute("INFO MEASUREMENT ORIG") + "\n"
    assert "\nDELETE CPU 6\n" in text and "\nADD DISC $DATA1(3)\n" in text
    assert "START MEASUREMENT ORIG, FROM 07 NOV 2025, 10:00:00, TO 07 NOV 2025, 12:00:00, " \
           "INTERVAL 90 SECONDS" in text
    again = session(url, tmp_path)
    again.execute(text.replace("ORIG", "COPY1"))
    rows = {r[1]: r for r in measurement_rows(db)}
    assert Contab.model_validate(rows["COPY1"][6]) == Contab.model_validate(rows["ORIG"][6])
    assert rows["COPY1"][3:6] == rows["ORIG"][3:6]


# ------------------------------------------------------------------ LIST / LISTALL


@pytest.fixture
def cpu_data(db, url, tmp_path):
    s = session(url, tmp_path)
    s.execute("ADD CPU *\nSTART MEASUREMENT CPU1, FROM 00:05, FOR 24 HOURS, INTERVAL 1 HOURS")
    mid = s.state.current
    e0, e1 = add_entity(db, "cpu", {"cpu": 0}), add_entity(db, "cpu", {"cpu": 1})
    for f, t in hours(NOW, 8, 9):
        add_record(db, mid, e0, "cpu", f, t, CPU_HOUR)
        add_record(db, mid, e1, "cpu", f, t, {"DISPATCHES": 3600 * (f.hour - 7)})
    return s


def test_list_rate_on_and_off_exact(cpu_data):
    s = cpu_data
    on = s.execute("LIST CPU 0, FROM 08:05, FOR 1 HOURS")
    lines = on.splitlines()
    assert lines[0] == "LIST CPU on \\DEMO, measurement CPU1, RATE ON"
    assert lines[2] == "CPU 0"
    assert lines[3] == "  from 07 Nov 2025 08:05:00  to 07 Nov 2025 09:05:00  elapsed 3600.000 s"
    body = {ln.split()[0]: ln.split()[1:] for ln in lines[4:]}
    assert body["CPU-BUSY-TIME"] == ["50.00", "%"]
    assert body["CPU-QTIME"] == ["0.250", "aql"]
    assert body["DISPATCHES"] == ["2.000", "/s"]
    assert body["RESPONSE-TIME"] == ["250.000", "ms/trans"]
    assert body["TRANSACTIONS"] == ["0.278", "/s"]
    assert body["ENDING-FREE-CIDS"] == ["17"]
    assert len(body) == len(CAT.entity("cpu").counters)
    off = s.execute("SET REPORT RATE OFF\nLIST CPU 0, FROM 08:05, FOR 1 HOURS")
    body = {ln.split()[0]: ln.split()[1:] for ln in off.splitlines()[4:]}
    assert body["CPU-BUSY-TIME"] == ["1,800,000,000", "us"]
    assert body["CPU-QTIME"] == ["900,000,000", "us"]
    assert body["DISPATCHES"] == ["7,200", "events"]
    assert body["RESPONSE-TIME"] == ["250,000,000", "us"]


def test_list_summary_window_listall_by_if_totals(cpu_data, db):
    s = cpu_data
    # no FROM/TO: the whole measurement; two hours summed per entity
    out = s.execute("SET REPORT RATE OFF\nLIST CPU *")
    assert "  from 07 Nov 2025 08:05:00  to 07 Nov 2025 10:05:00  elapsed 7200.000 s" in out
    assert "  DISPATCHES                              14,400 events" in out  # 7200 + 7200
    assert "  DISPATCHES                              10,800 events" in out  # 3600 + 7200
    assert "  ENDING-FREE-CIDS                            17 pages" not in out
    assert s.execute("LISTALL CPU 1").count("CPU 1\n") == 2
    brief = s.execute("SET REPORT FORMAT BRIEF, RATE ON\nLIST CPU *, BY DISPATCHES").splitlines()
    assert brief[1].split() == ["ENTITY", "FROM", "TO", "CPU-BUSY-TIME", "CPU-QTIME",
                                "DISPATCHES", "SWAPS", "DISC-IOS"]
    assert brief[2].split() == ["CPU", "0", "08:05:00", "10:05:00", "50.00", "0.250", "2.000",
                                "0.000", "0.000"]
    assert brief[3].split()[:2] == ["CPU", "1"] and brief[3].split()[6] == "1.500"
    assert s.execute("LIST CPU *, BY CPU").splitlines()[2].split()[:2] == ["CPU", "0"]
    only1 = s.execute("LIST CPU *, IF DISPATCHES < 1.6").splitlines()
    assert [ln.split()[1] for ln in only1[2:]] == ["1"]
    none = s.execute("LIST CPU *, IF CPU-BUSY-TIME > 50")
    assert none.endswith("no CPU records in the report window")
    tot = s.execute("LIST CPU *, TOTALS ONLY, RATE OFF").splitlines()
    assert tot[2].split()[:2] == ["TOTAL", "CPU"] and tot[2].split()[6] == "25,200"  # BRIEF
    e2 = add_entity(db, "cpu", {"cpu": 2})
    f, t = hours(NOW, 8, 8)[0]
    add_record(db, s.state.current, e2, "cpu", f, t, {})  # an all-zero record
    rows = s.execute("LIST CPU *, FROM 08:05, FOR 1 HOURS").splitlines()[2:]
    assert [r.split()[1] for r in rows] == ["0", "1", "2"]
    rows = s.execute("SET REPORT ZERO-REPORTS EXCLUDE\nLIST CPU *, FROM 08:05, FOR 1 HOURS")
    assert [r.split()[1] for r in rows.splitlines()[2:]] == ["0", "1"]
    with pytest.raises(MeascomError, match="unknown counter 'DISPATCH' for entity CPU; did you mean"):
        s.execute("LIST CPU *, BY DISPATCH")


def test_list_needs_a_current_measurement(db, url, tmp_path):
    s = session(url, tmp_path)
    with pytest.raises(MeascomError, match="no current measurement: ADD MEASUREMENT"):
        s.execute("LIST CPU *")
    with pytest.raises(MeascomError, match="no measurement NOPE on \\\\DEMO"):
        s.execute("ADD MEASUREMENT NOPE")


def test_listall_structured_and_add_measurement(cpu_data, url, tmp_path, db):
    other = session(url, tmp_path)
    assert other.execute("ADD MEASUREMENT CPU1").startswith("Measurement CPU1 (id ")
    out = other.execute("SET REPORT FORMAT STRUCTURED, LOADID L1\nLISTALL CPU *")
    assert out == "LISTALL CPU: 4 structured records written, LOADID L1"
    rows = db.execute("SELECT loadid, from_at, counters[6] FROM _measure.structured_record"
                      " ORDER BY structured_id").fetchall()
    # every interval record, in time order (MEASREAD_DIFF_ all^recs = 1, as the API's LISTALL):
    # 08:05 CPU 0, CPU 1, then 09:05 CPU 0, CPU 1
    (h8, _), (h9, _) = hours(NOW, 8, 9)
    assert rows == [("L1", h8, 7200), ("L1", h8, 3600), ("L1", h9, 7200), ("L1", h9, 7200)]


# ------------------------------------------------------------------ the collector's answers


class FakeCollector:
    """Answers control requests like collector/control.py does (status, read_active)."""

    def __init__(self, url: str, answers: list[dict]):
        self.url, self.answers, self.requests = url, list(answers), []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __enter__(self):
        with psycopg.connect(self.url, autocommit=True) as c:
            c.execute("INSERT INTO _measure.collector_heartbeat (collector_id, system_id, node,"
                      " started_at, beat_at, mode) VALUES ('\\DEMO', 1, 'demo', now(), now(),"
                      " 'live') ON CONFLICT (collector_id) DO UPDATE SET beat_at = now()")
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)

    def run(self):
        with psycopg.connect(self.url, autocommit=True) as c:
            while not self.stop.is_set():
                for rid, kind, payload in c.execute(
                        "SELECT request_id, kind, payload FROM _measure.control_request"
                        " WHERE answered_at IS NULL ORDER BY request_id").fetchall():
                    self.requests.append((kind, payload))
                    c.execute("UPDATE _measure.control_request SET response = %s,"
                              " answered_at = now() WHERE request_id = %s",
                              (psycopg.types.json.Jsonb(self.answers.pop(0)), rid))
                time.sleep(0.02)


def _cpu_counters(**kw) -> dict:
    out = {c.measure_name: 0 for c in CAT.entity("cpu").counters}
    out.update({k.replace("_", "-"): v for k, v in kw.items()})
    return out


def test_listactive_since_start_and_for(db, url, tmp_path):
    s = session(url, tmp_path, sleep=lambda sec: None)
    s.execute("ADD CPU *\nSTART MEASUREMENT LIVE1")
    mid = s.state.current
    rec = {"key": "cpu=2", "ids": {"cpu": 2}, "cpu": 2, "record_at": "2025-11-07T00:00:00+00:00"}
    a1 = {"entity": "cpu", "at": "2025-11-07T08:00:10+00:00", "records": [
        {**rec, "counters": _cpu_counters(CPU_BUSY_TIME=9_000_000, DISPATCHES=100),
         "baseline_at": "2025-11-07T08:00:00+00:00",
         "baseline": _cpu_counters(CPU_BUSY_TIME=4_000_000, DISPATCHES=40)}]}
    a2 = {"entity": "cpu", "at": "2025-11-07T08:00:20+00:00", "records": [
        {**rec, "counters": _cpu_counters(CPU_BUSY_TIME=11_000_000, DISPATCHES=150)}]}
    with FakeCollector(url, [a1, a1, a2]) as fake:
        out = s.execute("LISTACTIVE CPU 2")
        body = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines()[4:]}
        assert out.splitlines()[2:4] == [
            "CPU 2", "  from 07 Nov 2025 09:00:00  to 07 Nov 2025 09:00:10  elapsed 10.000 s"]
        assert body["CPU-BUSY-TIME"] == ["50.00", "%"]  # 5 s of 10 s
        assert body["DISPATCHES"] == ["6.000", "/s"]
        out = s.execute("SET REPORT RATE OFF\nLISTACTIVE CPU 2, FOR 10 SECONDS")
        body = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines()[4:]}
        assert body["CPU-BUSY-TIME"] == ["2,000,000", "us"]
        assert body["DISPATCHES"] == ["50", "events"]
    assert fake.requests[0] == ("read_active", {"entity": "cpu", "descriptor": {"cpu": 2},
                                                "measurement_id": mid})


def test_status_with_collector_answer_and_timeout(db, url, tmp_path):
    s = session(url, tmp_path, answer_timeout=0.3)
    s.execute("ADD CPU *\nSTART MEASUREMENT RUN1")
    db.execute("UPDATE _measure.measurement SET state = 'running'")
    answer = {"status": {"measurement_id": s.state.current, "name": "RUN1", "state": "running",
                         "entities": {"cpu": 4}, "counter_space_words": 480,
                         "cids": 4, "copies_written": 12, "not_allocated": {}},
              "cpus": {"0": {"cids": 4, "cid_limit": 512, "words": 480, "words_limit": 4000000}},
              "at": "2025-11-07T08:00:00+00:00"}
    with FakeCollector(url, [answer, answer]):
        out = s.execute("STATUS MEASUREMENT RUN1")
        assert "running, 4 CIDs, 480 words of counter space, 12 copies" in out
        assert "    CPU             4 entities" in out
        sub = s.execute("STATUS")
        assert "    CPU  0: 4/512 CIDs, 480/4000000 words" in sub
    with FakeCollector(url, []) as fake:  # a heartbeat but no answer
        fake.stop.set()
        out = s.execute("STATUS MEASUREMENT RUN1")
    assert "not answering (no answer within 0.3 s)" in out
    assert db.execute("SELECT count(*) FROM _measure.control_request").fetchone()[0] == 0


# ------------------------------------------------------------------ the rest


def test_help_exit_out_and_meassubsys(db, url, tmp_path):
    s = session(url, tmp_path)
    assert "START MEASUREMENT name" in s.execute("HELP START")
    assert "ADD" in s.execute("HELP").splitlines()[1]
    with pytest.raises(MeascomError, match="no help for 'NOPE'"):
        s.execute("HELP NOPE")
    s.execute("OUT report\nHELP EXIT\nOUT\n")
    assert (tmp_path / "REPORT").read_text() == "EXIT          end the session\n"
    with pytest.raises(MeascomError, match="here the measurement subsystem is the collector"):
        s.execute("START MEASSUBSYS")
    assert s.execute("ADD CPU *\nEXIT\nADD DISC *") == ""
    assert s.exited and [d.type for d in s.contab.descriptors] == ["CPU"]


def test_abbreviations_only_interactive(db, url, tmp_path):
    s = session(url, tmp_path, interactive=True)
    s.execute("AD CPU *")
    assert [d.type for d in s.contab.descriptors] == ["CPU"]
    (tmp_path / "f").write_text("AD DISC *\n")
    with pytest.raises(MeascomError) as ei:
        s.execute("OBEY f")
    assert ei.value.syntax and ei.value.file == "f"


def test_system_choice(url, db):
    with pytest.raises(MeascomError, match="unknown system 'WEST'; systems in the database: \\\\DEMO"):
        Session(url, system="WEST")
    with Session(url, system="demo") as s:
        assert (s.system_name, s.tz.key) == ("\\DEMO", "Europe/Berlin")
