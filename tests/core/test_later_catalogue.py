"""The H-, J- and L-series catalogue end to end (issue 29): a J-series CPU file with its IPU
columns and a file of each later entity type (SQLPROC, SQLSTMT, SERVERNET, DISKFILE, OSSCPU,
OSSNS) import, export and import again into an empty database with the same exports and
reports; the IPU balance, the top SQL statements, DISKFILE activity and OSS CPU use are exact
on a small fixed set; a 1986-only CPU file still loads as before and reads as one IPU."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from collector.measure.read import ReadQuery, rate_unit, read
from core import schema
from core.catalog import load_catalog
from core.importer import interval_header
from core.reports import render_text, run_report
from tests.api.conftest import make_client
from tests.core.test_import_export import (
    M15,
    NY,
    SYSTEM,
    ZONE,
    _exports,
    cpu_csv,
    iso,
    run,
    write,
)
from tests.engine import MODE
from tests.tokens import create_token

CAT = load_catalog()
D = Decimal
LATER = ("sqlproc", "sqlstmt", "servernet", "diskfile", "osscpu", "ossns")
FROM_AT = datetime(2026, 3, 2, 9, 0, tzinfo=NY)
TO_AT = datetime(2026, 3, 2, 10, 0, tzinfo=NY)

# J-series CPUs: CPU 0 with 4 IPUs, CPU 1 with 2; CPU-BUSY-TIME is the sum of its IPUs' busy
# (cpu, IPUS, per interval the busy µs of each IPU)
J_CPUS = [(0, 4, [(450_000_000, 225_000_000, 90_000_000, 135_000_000), (450_000_000, 450_000_000, 0, 0)]),
          (1, 2, [(180_000_000, 180_000_000), (180_000_000, 180_000_000)])]


def j_cpu_csv() -> str:
    ipu_cols = [f"IPU-{n}-{k}" for k in range(4) for n in ("BUSY-TIME", "DISPATCHES", "QTIME")]
    lines = [",".join(["SYSTEM", "CPU", "FROM-TIMESTAMP", "TO-TIMESTAMP", "DELTA-TIME", "CPU-BUSY-TIME",
                       "DISPATCHES", "IPUS", *ipu_cols])]
    for cpu, ipus, intervals in J_CPUS:
        for i, busy in enumerate(intervals):
            frm, to = iso(9, 15 * i), iso(9, 15 * (i + 1))
            per_ipu = []
            for k in range(4):
                b = busy[k] if k < len(busy) else 0
                per_ipu += [b, b // 10_000, b // 2]  # busy, dispatches, qtime
            lines.append(",".join(map(str, [SYSTEM, cpu, frm, to, M15, sum(busy), sum(busy) // 10_000, ipus,
                                            *per_ipu])))
    return "\n".join(lines) + "\n"


# SQLSTMT: (pin, program, module, statement index, calls, elapsed µs)
STATEMENTS = [(40, "$APPL.SQL.ORDERS", "CAT.SCH.ORDERSMOD", 1, 100, 2_000_000),
              (41, "$APPL.SQL.ORDERS", "CAT.SCH.ORDERSMOD", 1, 300, 2_000_000),
              (40, "$APPL.SQL.ORDERS", "CAT.SCH.ORDERSMOD", 2, 10, 500_000),
              (42, "$APPL.SQL.BILL", "CAT.SCH.BILLMOD", 1, 1000, 10_000_000),
              (42, "$APPL.SQL.BILL", "CAT.SCH.BILLMOD", 2, 0, 0)]


def sqlstmt_csv() -> str:
    lines = ["SYSTEM,CPU,PIN,PROCESS-NAME,PROGRAM-FILE-NAME,MODULE-NAME,STATEMENT-INDEX,FROM-TIMESTAMP,"
             "TO-TIMESTAMP,DELTA-TIME,CALLS,ELAPSED-BUSY-TIME,RECORDS-ACCESSED,DISC-READS,RECOMPILES"]
    for pin, prog, module, index, calls, elapsed in STATEMENTS:
        lines.append(f"{SYSTEM},2,{pin},$SQ{pin},{prog},{module},{index},{iso(9, 0)},{iso(9, 15)},{M15},"
                     f"{calls},{elapsed},{calls * 3},{calls // 10},0")
    return "\n".join(lines) + "\n"


ID_VALUES = {"cpu": 3, "pin": 77, "process_name": "$ZNS", "program_file_name": "$SYSTEM.SYSTEM.OSSNS",
             "priority": 170, "module_name": "CAT.SCH.M1", "statement_index": 4, "adapter_name": "ADPT1",
             "sac_name": "SAC0", "device_name": "$DATA01", "fcb_number": 12, "file_name": "$DATA01.APPL.ORDERS"}


def entity_csv(name: str) -> str:
    """Two intervals of one entity of the type, every counter given a value its kind allows."""
    ent = CAT.entity(name)
    head = [h for h in interval_header(ent) if h not in ("MEASUREMENT", "ERROR")]
    rows = [",".join(head)]
    for i in range(2):
        vals = {"SYSTEM": SYSTEM, "FROM-TIMESTAMP": iso(9, 15 * i), "TO-TIMESTAMP": iso(9, 15 * (i + 1)),
                "DELTA-TIME": M15, **{f.upper().replace("_", "-"): v for f, v in ID_VALUES.items()}}
        for c in ent.counters:
            timed = c.kind in ("busy", "qbusy", "queue", "elapsed")
            vals[c.measure_name] = (c.position + 1) * (1_000_000 if timed else 10) * (i + 1)
        rows.append(",".join(str(vals[h]) for h in head))
    return "\n".join(rows) + "\n"


@pytest.fixture
def env(fresh_database, monkeypatch, tmp_path) -> str:
    url = fresh_database("_later")
    schema.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) VALUES (%s, 7, %s)",
                  (SYSTEM, ZONE))
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    return url


def _rows(url: str, name: str, **params) -> list[dict]:
    with psycopg.connect(url, row_factory=dict_row) as c:
        return run_report(c, name, system=SYSTEM, from_at=FROM_AT, to_at=TO_AT, **params)


# ---------------------------------------------------------------- exact reports


def test_ipu_balance_is_exact(env: str, tmp_path: Path) -> None:
    out = run("import", write(tmp_path, "jcpu.csv", j_cpu_csv()))
    assert out.exit_code == 0, out.output
    assert "4 CPU interval records: 4 stored" in out.output
    rows = _rows(env, "ipu-balance")
    assert [{k: v for k, v in r.items() if k != "ipu_busy_percent"} for r in rows] == [
        {"cpu": 0, "ipus": 4, "intervals": 2, "busy_percent": D(100), "busy_per_ipu_percent": D(25),
         "ipu_busy_min": D(5), "ipu_busy_max": D(50), "ipu_busy_spread": D(45), "busiest_ipu": 0},
        {"cpu": 1, "ipus": 2, "intervals": 2, "busy_percent": D(40), "busy_per_ipu_percent": D(20),
         "ipu_busy_min": D(20), "ipu_busy_max": D(20), "ipu_busy_spread": D(0), "busiest_ipu": 0}]
    assert [[float(x) for x in r["ipu_busy_percent"]] for r in rows] == [[50, 37.5, 5, 7.5], [20, 20]]
    text = render_text("ipu-balance", rows, {"system": SYSTEM, "from_at": FROM_AT, "to_at": TO_AT})
    assert "IPU BALANCE REPORT" in text and "50.0 37.5 5.0 7.5" in text
    # the hour tier of the CPUs reads CPU-BUSY-TIME as before (not normalised)
    with psycopg.connect(env) as c:
        assert c.execute("SELECT cpu, busy_avg FROM measure.cpu_hour ORDER BY cpu").fetchall() == [
            (0, D(100)), (1, D(40))]


def test_a_1986_cpu_file_still_loads_and_reads_as_one_ipu(env: str, tmp_path: Path) -> None:
    out = run("import", write(tmp_path, "cpu.csv", cpu_csv()))
    assert out.exit_code == 0 and "6 CPU interval records: 6 stored" in out.output
    rows = _rows(env, "ipu-balance")
    assert [(r["cpu"], r["ipus"], r["busy_percent"], r["busy_per_ipu_percent"], r["ipu_busy_max"],
             r["ipu_busy_percent"]) for r in rows] == [(0, 1, D("62.5"), D("62.5"), None, None),
                                                        (1, 1, D(15), D(15), None, None)]
    with psycopg.connect(env) as c:
        assert c.execute("SELECT cpu, busy_avg FROM measure.cpu_hour ORDER BY cpu").fetchall() == [
            (0, D("62.5")), (1, D(15))]


def test_top_sql_statements_are_exact(env: str, tmp_path: Path) -> None:
    out = run("import", write(tmp_path, "stmt.csv", sqlstmt_csv()))
    assert out.exit_code == 0 and "5 SQLSTMT interval records: 5 stored" in out.output, out.output
    rows = _rows(env, "sql-statements")
    assert [(r["program_file_name"], r["module_name"], r["statement_index"], r["processes"], r["calls"],
             r["elapsed_seconds"], r["elapsed_ms_per_call"], r["records_accessed"]) for r in rows] == [
        ("$APPL.SQL.ORDERS", "CAT.SCH.ORDERSMOD", 2, 1, D(10), D("0.5"), D(50), D(30)),
        ("$APPL.SQL.BILL", "CAT.SCH.BILLMOD", 1, 1, D(1000), D(10), D(10), D(3000)),
        ("$APPL.SQL.ORDERS", "CAT.SCH.ORDERSMOD", 1, 2, D(400), D(4), D(10), D(1200))]
    assert [r["statement_index"] for r in _rows(env, "sql-statements", top=2)] == [2, 1]
    # the API takes the same `top` (GET /reports/sql-statements)
    auth = {"Authorization": f"Bearer {create_token(env, 't', 'read')}"}
    with make_client(env) as client:
        r = client.get("/reports/sql-statements", headers=auth,
                       params={"system": SYSTEM, "from": FROM_AT.isoformat(), "to": TO_AT.isoformat(), "top": 2})
    assert r.status_code == 200, r.text
    assert [x["statement_index"] for x in r.json()] == [2, 1]
    text = render_text("sql-statements", rows, {"system": SYSTEM, "from_at": FROM_AT, "to_at": TO_AT})
    assert "TOP SQL STATEMENTS" in text and "CAT.SCH.BILLMOD" in text
    # MEASREAD: RATE ON of an Elapsed counter is % of the interval, as MEASCOM shows it; RATE OFF µs
    with psycopg.connect(env) as c:
        assert c.execute("SELECT measure.rate('elapsed', 450000000, 900000000)").fetchone() == (D(50),)
        mid = c.execute("SELECT measurement_id FROM _measure.measurement").fetchone()[0]
        q = ReadQuery(entity="SQLSTMT", descriptor={"pin": 42}, counters=("CALLS", "ELAPSED-BUSY-TIME"),
                      all_records=True, limit=None, exact=True)
        got = read(c, mid, q)
        assert [(r.ids["statement_index"], round(r.values["calls"], 12), round(r.values["elapsed_busy_time"], 12))
                for r in sorted(got.records, key=lambda r: r.ids["statement_index"])] == [
            (1, round(D(1000) / 900, 12), round(D(1000) / 900, 12)), (2, 0, 0)]  # /s and % busy
        assert rate_unit(CAT.entity("sqlstmt").counter("ELAPSED-BUSY-TIME")) == "%"


# ---------------------------------------------------------------- the round trip


def test_every_later_type_round_trips_through_export(fresh_database, tmp_path, monkeypatch) -> None:
    source, target = fresh_database("_later_a"), fresh_database("_later_b")
    for url in (source, target):
        schema.apply(url, mode=MODE)
        with psycopg.connect(url) as c:
            c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) VALUES (%s, 7, %s)",
                      (SYSTEM, ZONE))
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DATABASE_URL", source)
    files = {"jcpu": j_cpu_csv(), "stmt": sqlstmt_csv(), **{n: entity_csv(n) for n in LATER if n != "sqlstmt"}}
    for name, text in files.items():
        out = run("import", write(tmp_path, f"{name}.csv", text))
        assert out.exit_code == 0, (name, out.output)
    with psycopg.connect(source) as c:
        stored = dict(c.execute("SELECT t.entity, sum(r.n) FROM _measure.interval_run r"
                                " JOIN _measure.entity_type t USING (type_code) GROUP BY 1").fetchall())
    assert stored == {"cpu": 4, "sqlstmt": 5, **{n: 2 for n in LATER if n != "sqlstmt"}}
    out = run("export", "--tier", "interval", "-o", str(tmp_path / "out"))
    assert out.exit_code == 0, out.output
    monkeypatch.setenv("DATABASE_URL", target)
    for f in sorted((tmp_path / "out").glob("*-interval.csv")):
        res = run("import", str(f))
        assert res.exit_code == 0, (f.name, res.output)
    a, b = _exports(source, "interval"), _exports(target, "interval")
    assert a == b
    for n in LATER:  # every counter of every later type came back (the generated files: non-zero)
        body = a[f"{n}-interval.csv"].decode().splitlines()
        k = len(CAT.entity(n).counters)
        assert body[0].split(",")[-k:] == list(CAT.entity(n).measure_names)
        assert len(body) == (6 if n == "sqlstmt" else 3)
        if n != "sqlstmt":
            assert all(v != "0" for v in body[-1].split(",")[-k:]), n
    assert b"IPU-BUSY-TIME-3" in a["cpu-interval.csv"]
    for name in ("ipu-balance", "sql-statements", "diskfile-activity", "oss-cpu"):
        assert _rows(source, name) == _rows(target, name) != []
    for kind in ("hour", "shift", "month", "year"):
        assert _exports(source, kind) == _exports(target, kind), kind


def test_a_wrong_ipu_column_is_named(env: str, tmp_path: Path) -> None:
    text = j_cpu_csv().replace("IPU-QTIME-3", "IPU-QTIME-9", 1)
    out = run("import", write(tmp_path, "bad.csv", text), "--entity", "cpu")
    assert out.exit_code == 2 and "IPU-QTIME-9: not a field of CPU interval records" in " ".join(out.output.split())



def test_diskfile_activity_and_oss_cpu_are_exact(env: str, tmp_path: Path) -> None:
    for name in ("diskfile", "osscpu"):
        out = run("import", write(tmp_path, f"{name}.csv", entity_csv(name)))
        assert out.exit_code == 0, out.output

    def total(entity: str, counter: str) -> int:  # entity_csv's two intervals: 1x and 2x the value
        c = CAT.entity(entity).counter(counter)
        timed = c.kind in ("busy", "qbusy", "queue", "elapsed")
        return 3 * (c.position + 1) * (1_000_000 if timed else 10)

    def f(counter: str) -> int:
        return total("diskfile", counter)

    (row,) = _rows(env, "diskfile-activity")
    assert row == {"device_name": "$DATA01", "file_name": "$DATA01.APPL.ORDERS", "requests": f("REQUESTS"),
                   "driver_input_calls": f("DRIVER-INPUT-CALLS"), "driver_output_calls": f("DRIVER-OUTPUT-CALLS"),
                   "cache_read_hits": f("CACHE-READ-HITS"), "requests_blocked": f("REQUESTS-BLOCKED"),
                   "lockwait_seconds": D(f("LOCKWAIT-TIME")) / 1_000_000,
                   # a max value: the greatest of the window's (the second interval's, 2x), µs -> ms
                   "max_lockwait_ms": D(f("MAX-LOCKWAIT-TIME")) * 2 / 3 / 1000,
                   "block_splits": f("BLOCK-SPLITS"),
                   "sql_row_changes": f("SQL-INSERTS") + f("SQL-UPDATES") + f("SQL-DELETES")}
    (oss,) = _rows(env, "oss-cpu")
    seconds = 2 * M15 // 1_000_000
    assert (oss["cpu"], oss["intervals"], oss["oss_processes_end"]) == (
        3, 2, total("osscpu", "OSS-PROCESSES-END") * 2 // 3)
    assert [round(oss[k], 9) for k in ("oss_busy_percent", "pipe_messages_per_second",
                                       "oss_file_calls_per_second")] == [
        round(D(100 * total("osscpu", "OSS-BUSY-TIME")) / (2 * M15), 9),
        round(D(total("osscpu", "PIPE-MESSAGES")) / seconds, 9),
        round(D(total("osscpu", "OSS-FILE-CALLS")) / seconds, 9)]
    text = render_text("diskfile-activity", [row], {"system": SYSTEM, "from_at": FROM_AT, "to_at": TO_AT})
    assert "DISKFILE ACTIVITY REPORT" in text and "$DATA01.APPL.ORDERS" in text
