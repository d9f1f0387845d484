"""The node of today's kind end to end (issue 29, item 3): half an hour of \\TODAY
(collector/node/nodes/today.yaml) backfilled by the collector as `measuredb backfill --node
today` does (default measurement of every entity, 60-s intervals, seed 1986), then the reports
ipu-balance, sql-statements, diskfile-activity and oss-cpu read as the read-only role: rows for
every CPU, statement, disc file; their figures agree with the interval records of the 1986
types they come from (USERDEF, DISCOPEN, PROCESS)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import psycopg
import pytest

from collector.service import Collector
from collector.settings import CollectorSettings
from core import schema
from core.reports import run_report
from core.times import to_us
from tests.engine import MODE

SYSTEM = "\\TODAY"
START = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)  # a Monday, 10:00 in London: the peak
END = START + timedelta(minutes=30)


@pytest.fixture(scope="module")
def today_db(fresh_database, tmp_path_factory) -> str:
    url = fresh_database("_today")
    schema.apply(url, mode=MODE)
    data = tmp_path_factory.mktemp("today-collector")
    c = Collector(CollectorSettings(node="today", seed=1986, backfill_days=0, data_dir=data), url)
    c.register(epoch_us=to_us(START))
    c.build()
    c.backfill(to_us(END))
    c.close()
    return url


@pytest.fixture
def reader(today_db: str):
    with psycopg.connect(today_db) as conn:
        conn.execute("SET ROLE measure_reader")
        yield conn


def report(conn: psycopg.Connection, name: str, **params) -> list[dict]:
    return run_report(conn, name, system=SYSTEM, from_at=START, to_at=END, **params)


def counters(conn: psycopg.Connection, entity: str, names: list[str]) -> list[tuple]:
    """(entity ids, interval start, values) of the window's interval records."""
    return conn.execute(
        "SELECT e.ids, w.from_at, w.v FROM _measure.window_counters(measure.system_id_of(%s), %s, %s, %s, "
        "NULL, %s) w JOIN _measure.entity e ON e.entity_id = w.entity_id",
        (SYSTEM, entity, START, END, names)).fetchall()


def test_ipu_balance(reader: psycopg.Connection, today_db: str) -> None:
    rows = report(reader, "ipu-balance")
    assert [r["cpu"] for r in rows] == [0, 1, 2, 3]
    for r in rows:
        assert r["ipus"] == 4 and r["intervals"] == 30
        assert 25 < r["busy_percent"] < 400  # the sum over 4 IPUs
        assert r["busy_per_ipu_percent"] == pytest.approx(r["busy_percent"] / 4)
        assert len(r["ipu_busy_percent"]) == 4 and r["ipu_busy_spread"] >= 0
        # Σ IPU busy % = CPU busy % (the stored counters are rounded µs: 5 per interval at most)
        assert sum(r["ipu_busy_percent"]) == pytest.approx(r["busy_percent"], abs=Decimal("0.001"))
    with psycopg.connect(today_db) as conn:
        recs = counters(conn, "cpu", ["cpu_busy_time"] + [f"ipu_busy_time_{k}" for k in range(4)])
    assert len(recs) == 4 * 30
    for _ids, _at, v in recs:
        assert abs(sum(v[1:]) - v[0]) <= 5 and max(v[1:]) <= 60_000_000 + 5


def test_sql_statements(reader: psycopg.Connection, today_db: str) -> None:
    rows = report(reader, "sql-statements")
    assert sorted(r["statement_index"] for r in rows) == [1, 2, 3, 4, 5, 6, 7]
    assert {(r["program_file_name"], r["module_name"]) for r in rows} == {("$APPL.SHOP.ORDSRV", "SHOP.SCH.ORDMOD")}
    assert rows[0]["statement_index"] == 7  # the delivery: the longest elapsed per call
    by = {r["statement_index"]: r for r in rows}
    with psycopg.connect(today_db) as conn:
        ud = counters(conn, "userdef", ["time_value"])
    throughput = sum(v[0] for ids, _, v in ud if ids["name"] == "THROUGHPUT")
    resp_us = sum(v[0] for ids, _, v in ud if ids["name"] == "RESP-TIME")
    assert throughput > 100_000
    for k in (1, 2, 3, 4, 5):  # run by every request: CALLS = the servers' requests
        assert by[k]["calls"] == throughput
    assert by[6]["calls"] < by[1]["calls"] / 5 and by[7]["calls"] < by[6]["calls"]
    # the statements share each request's response time: Σ elapsed = Σ RESP-TIME
    assert sum(r["elapsed_seconds"] for r in rows) * 1_000_000 == resp_us
    assert by[3]["disc_reads"] > 0 and by[1]["disc_reads"] == 0  # the stock is not cached
    assert report(reader, "sql-statements", top=3) == rows[:3]


def test_diskfile_activity(reader: psycopg.Connection, today_db: str) -> None:
    rows = report(reader, "diskfile-activity")
    assert len(rows) == 14  # one per file per volume (nodes/today.yaml)
    with psycopg.connect(today_db) as conn:
        dop = counters(conn, "discopen", ["requests", "driver_input_calls"])
    for k, col in ((0, "requests"), (1, "driver_input_calls")):
        want: dict[str, int] = {}
        for ids, _, v in dop:
            want[ids["file_name"]] = want.get(ids["file_name"], 0) + v[k]
        # TMF.AUDIT: written by the TMF monitor, opened by no process (its requests 0)
        assert {r["file_name"]: r[col] for r in rows} == {r["file_name"]: want.get(r["file_name"], 0)
                                                          for r in rows}
        assert set(want) <= {r["file_name"] for r in rows}
    assert rows[0]["file_name"] == "$DATA1.SHOP.ITEM"  # one partition, read by every request


def test_oss_cpu(reader: psycopg.Connection, today_db: str) -> None:
    rows = report(reader, "oss-cpu")
    assert [r["cpu"] for r in rows] == [0, 1, 2, 3]
    with psycopg.connect(today_db) as conn:
        procs = counters(conn, "process", ["cpu_busy_time"])
    for r in rows:
        assert r["intervals"] == 30 and r["oss_processes_end"] == 2  # 8 requesters on 4 CPUs
        busy = sum(v[0] for ids, _, v in procs
                   if ids["program_file_name"].startswith("/") and ids["cpu"] == r["cpu"])
        assert r["oss_busy_percent"] == pytest.approx(Decimal(100 * busy) / Decimal(30 * 60_000_000))
        assert r["oss_file_calls_per_second"] == pytest.approx(2 * r["pipe_messages_per_second"],
                                                                  rel=Decimal("1e-6"))
