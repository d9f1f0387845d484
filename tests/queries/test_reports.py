"""Every report in queries/: exact rows from the hand-built data base of
tests/schema/test_tiers_data.py, the ENFORM text layout, and clear errors."""

from __future__ import annotations

import importlib.util
import re
from datetime import UTC, date, datetime
from decimal import Decimal as D
from pathlib import Path

import psycopg
import pytest

from core import reports
from core.reports import build_params
from tests.engine import MODE

_spec = importlib.util.spec_from_file_location(
    "test_tiers_data", Path(__file__).parents[1] / "schema" / "test_tiers_data.py")
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)

QUERIES = sorted(reports.QUERIES.glob("*.sql"))
WINDOW = {"from_at": datetime(2024, 3, 10, tzinfo=UTC), "to_at": datetime(2024, 3, 11, tzinfo=UTC)}


@pytest.fixture
def db(conn):
    return data.load(conn)


@pytest.mark.parametrize("path", QUERIES, ids=lambda p: p.stem)
def test_every_query_has_a_header_an_order_by_and_a_registry_entry(path: Path) -> None:
    text = path.read_text()
    assert text.startswith(f"-- {path.stem}: ") and "-- Parameters:" in text and "-- Output:" in text
    assert "ORDER BY" in text
    assert not re.search(r"%(?![(%])", text), "a bare % (comments included) is a placeholder to psycopg"
    assert path.stem in reports.REPORTS
    assert set(reports.REPORTS) == {p.stem for p in QUERIES}


def test_threshold_report_lists_exactly_the_violating_cpu_hours(db, conn) -> None:
    rows = reports.run_report(conn, "threshold", system=data.SYSTEM, day=date(2024, 3, 9), shift=3)
    assert [(r["cpu"], r["time_of_day"], r["qlen_max"], r["qlen_delt"], r["swap_max"], r["busy_max"],
             r["busy_delt"], r["ibusy_max"], r["qlen_avg"], r["swap_avg"], r["busy_avg"], r["ibusy_avg"])
            for r in rows] == [(0, "23:00", 3, 2, 3, 90, 40, 30, 2, 2, 70, 20),
                               (0, "03:00", 1, 0, 0, 80, 0, 0, 1, 0, 80, 0)]
    assert rows[1]["broken"] == ["busy_max > 70"]
    text = reports.render_text("threshold", rows, {"system": data.SYSTEM, "day": date(2024, 3, 9), "shift": 3})
    assert text.splitlines()[0].strip() == "THRESHOLD REPORT"
    assert "   OS VERSION: B30" in text and "   SHIFT:      3" in text
    lines = text.splitlines()
    head = lines.index(next(line for line in lines if line.lstrip().startswith("CPU")))
    assert lines[head - 1].split() == ["TIME", "MAX", "DELT", "MAX", "MAX", "DELT", "MAX", "AVG", "AVG", "AVG", "AVG"]
    assert lines[head + 3].split() == ["0", "23:00", "3.0", "2.0", "3.0", "90.0", "40.0", "30.0", "2.0", "2.0", "70.0", "20.0"]


@pytest.mark.parametrize("shift", [None, 3, 1])
def test_threshold_report_reads_stored_violations_or_evaluates_the_same(db, conn, shift) -> None:
    assert conn.execute("SELECT count(*) FROM _measure.breach_state").fetchone() == (1,)
    stored = reports.run_report(conn, "threshold", system=data.SYSTEM, day=date(2024, 3, 9), shift=shift)
    conn.execute("DELETE FROM _measure.breach_state")      # as an edit of the thresholds does
    evaluated = reports.run_report(conn, "threshold", system=data.SYSTEM, day=date(2024, 3, 9), shift=shift)
    assert stored == evaluated and len(stored) == (0 if shift == 1 else 2)


def test_threshold_report_follows_late_data_and_threshold_edits(db, conn) -> None:
    db.cpu("A", 0, data.t(10, 10, 30), 30, busy=0, qlen=0)   # the rest of the half-measured 03:00 PDT hour
    db.note_and_condense(data.t(10, 10, 30), data.t(10, 10, 30))

    def report():
        return [(r["time_of_day"], r["busy_max"], r["busy_delt"], r["busy_avg"], r["qlen_delt"], r["broken"])
                for r in reports.run_report(conn, "threshold", system=data.SYSTEM, day=date(2024, 3, 9), shift=3)]

    assert report() == [
        ("23:00", 90, 40, 70, 2, ["busy_delt > 20", "busy_max > 70", "ibusy_max > 25", "qlen_delt > 1",
                                  "qlen_max > 2", "swap_max > 2"]),
        ("03:00", 80, 80, 40, 1, ["busy_delt > 20", "busy_max > 70"])]
    conn.execute("UPDATE _measure.threshold SET limit_value = 50 WHERE system_id IS NULL AND item = 'busy_delt'")
    conn.execute("DELETE FROM _measure.threshold WHERE system_id IS NULL AND item = 'swap_max'")
    assert [(t, b) for t, *_, b in report()] == [
        ("23:00", ["busy_max > 70", "ibusy_max > 25", "qlen_delt > 1", "qlen_max > 2"]),
        ("03:00", ["busy_delt > 50", "busy_max > 70"])]
    stored = report()
    conn.execute("DELETE FROM _measure.breach_state")
    assert report() == stored


def test_threshold_report_of_a_quiet_day_says_so(db, conn) -> None:
    rows = reports.run_report(conn, "threshold", system=data.SYSTEM, day=date(2024, 3, 19))
    assert rows == []
    assert "NO THRESHOLD VIOLATIONS" in reports.render_text("threshold", rows, {"system": data.SYSTEM, "day": date(2024, 3, 19)})


def test_thresholds_are_data(db, conn) -> None:
    conn.execute("INSERT INTO _measure.threshold (system_id, entity, item, operator, limit_value) "
                 "VALUES (%s, 'cpu', 'busy_max', '>', 95)", (db.system_id,))
    rows = reports.run_report(conn, "threshold", system=data.SYSTEM, day=date(2024, 3, 9), shift=3)
    assert [(r["time_of_day"], r["broken"]) for r in rows] == [
        ("23:00", ["busy_delt > 20", "ibusy_max > 25", "qlen_delt > 1", "qlen_max > 2", "swap_max > 2"])]


def test_cpu_trend_picks_the_hour_with_the_largest_queue_each_day(db, conn) -> None:
    rows = reports.run_report(conn, "cpu-trend", system=data.SYSTEM, date_from=date(2024, 3, 9), date_to=date(2024, 3, 20))
    assert [(r["day"].isoformat(), r["loadid"], r["cpu"], r["qlen_max"], r["qlen_delt"], r["swap_max"],
             r["busy_max"], r["busy_delt"]) for r in rows] == [
        ("2024-03-09", "DT06923", 0, 2, 2, 2, 70, 60),
        ("2024-03-10", "DT07003", 0, 1, 0, 0, 80, 0),
        ("2024-03-20", "DT08000", 0, D("0.5"), 0, 0, 40, 0)]
    assert "CPU TREND REPORT" in reports.render_text("cpu-trend", rows, {"system": data.SYSTEM,
                                                     "date_from": date(2024, 3, 9), "date_to": date(2024, 3, 20)})


def test_process_reports(db, conn) -> None:
    s = data.SYSTEM
    assert [tuple(r.values()) for r in reports.run_report(conn, "process-summary", system=s, **WINDOW)] == [
        ("$APPL.ET1.SERVER", 2, 1080, 200, 1200), ("$SYSTEM.SYSTEM.FUP", 1, 1800, 0, 3600)]
    busy = reports.run_report(conn, "busy-process", system=s, **WINDOW)
    assert [(r["process_name"], r["cpu_seconds"], r["cpu_utilization_ratio"], r["io_per_second"]) for r in busy] == [
        ("$COPY", 1800, D("0.5"), 1), ("$S1", 720, D("0.2"), D("0.25"))]
    act = reports.run_report(conn, "process-activity", system=s, **WINDOW)
    assert [(r["process_name"], r["cpu_seconds_per_trans"], r["io_per_trans"], r["cpu_seconds_per_io"]) for r in act] == [
        ("$S1", D("7.2"), 9, D("0.8")), ("$S2", D("3.6"), 3, D("1.2"))]
    files = reports.run_report(conn, "file-summary", system=s, **WINDOW)
    assert [tuple(r.values()) for r in files] == [("$DATA1.ET1.ACCOUNT", 2, 80, 10, 5, 0, 2)]
    pdfa = reports.run_report(conn, "process-disc-file-activity", system=s, cpu=0, pin=10, **WINDOW)
    assert [(r["file_name"], r["reads"]) for r in pdfa] == [("$DATA1.ET1.#TEMP", 99), ("$DATA1.ET1.ACCOUNT", 50)]
    assert "TOTAL" in reports.render_text("process-disc-file-activity", pdfa, {"system": s, **WINDOW})
    assert reports.run_report(conn, "discopen-summary", system=s, **WINDOW) == []


def test_discopen_summary_counts_opens_and_sums_their_driver_calls(db, conn) -> None:
    def discopen(file_name: str, opener: tuple[int, int], ocb: int, start, minutes: int, meas: str = "A",
                 record_at=None, **values: int) -> None:
        db.interval(meas, "discopen", 0, start, minutes,
                    {"opener_cpu": opener[0], "opener_pin": opener[1], "ocb_number": ocb,
                     "opener_system_name": data.SYSTEM, "file_name": file_name}, record_at=record_at, **values)

    t = data.t
    acct, hist = "$DATA1.ET1.ACCOUNT", "$DATA1.ET1.HISTORY"
    # ACCOUNT: open 1 over two intervals (one open), open 2, and open 1 again (a new counter record)
    discopen(acct, (0, 10), 1, t(10, 7), 30, driver_input_calls=40, driver_output_calls=10, cache_hits=30,
             block_splits=1, requests_blocked=2)
    discopen(acct, (0, 10), 1, t(10, 7, 30), 30, driver_input_calls=20, driver_output_calls=5, cache_hits=15,
             requests_blocked=1)
    discopen(acct, (1, 11), 1, t(10, 7), 60, driver_input_calls=5, cache_hits=4)
    discopen(acct, (0, 10), 1, t(10, 9), 60, record_at=t(10, 9), driver_input_calls=1, driver_output_calls=1,
             block_splits=2)
    # HISTORY: a counter decrease (a reset) counts as 0, not as -5
    discopen(hist, (0, 10), 2, t(10, 7), 60, driver_output_calls=7)
    discopen(hist, (0, 10), 2, t(10, 8), 60, driver_input_calls=2, driver_output_calls=-5)
    # not listed: a name with '#', no input or output (cache hits only), outside the window
    discopen("$DATA1.ET1.#TEMP", (0, 10), 3, t(10, 7), 60, driver_input_calls=99)
    discopen("$DATA1.ET1.TELLER", (0, 10), 4, t(10, 7), 60, cache_hits=12, requests=12)
    discopen(acct, (0, 10), 1, t(11, 7), 60, driver_input_calls=1000)
    # measured by the other measurement only
    discopen("$DATA1.ET1.BRANCH", (1, 11), 2, t(10, 7), 60, meas="B", driver_input_calls=3)
    db.note_and_condense(t(10, 7), t(11, 7))             # as the collector does after every slice

    rows = reports.run_report(conn, "discopen-summary", system=data.SYSTEM, **WINDOW)
    # file, COUNT, TOTAL INPUT, CACHE HITS, TOTAL WRITES, TOTAL BLOCK SPLITS, TOTAL STALLS
    assert [tuple(r.values()) for r in rows] == [
        (acct, 3, 40 + 20 + 5 + 1, 30 + 15 + 4, 10 + 5 + 1, 1 + 2, 2 + 1),
        ("$DATA1.ET1.BRANCH", 1, 3, 0, 0, 0, 0),
        (hist, 1, 2, 0, 7, 0, 0)]
    only_a = reports.run_report(conn, "discopen-summary", system=data.SYSTEM, measurement=db.meas["A"], **WINDOW)
    assert [r["file_name"] for r in only_a] == [acct, hist]
    text = reports.render_text("discopen-summary", rows, {"system": data.SYSTEM, **WINDOW}).splitlines()
    assert text[0].strip() == "DISCOPEN SUMMARY REPORT"
    assert [line.split() for line in text if line.startswith("$DATA1")] == [
        [acct, "3", "66", "49", "16", "3", "3"], ["$DATA1.ET1.BRANCH", "1", "3", "0", "0", "0", "0"],
        [hist, "1", "2", "0", "7", "0", "0"]]


def test_transaction_resource_and_capacity_forecast(db, conn) -> None:
    tr = {r["component"]: r for r in reports.run_report(
        conn, "transaction-resource", system=data.SYSTEM, transaction_process="$S%", **WINDOW)}
    # 200 transactions; servers 1080 s, FUP 1800 s ('other'), CPU busy 5220 s in all: measurement
    # B's half hour of CPU 0 at 08:00 (1800 s busy) does not count, A measured that whole hour
    assert tr["server"]["cpu_ms_per_transaction"] == 5400 and tr["other"]["cpu_ms_per_transaction"] == 9000
    assert tr["total"]["cpu_seconds"] == 5220
    assert tr["system_overhead"]["cpu_seconds"] == 5220 - 1080 - 1800
    cf = reports.run_report(conn, "capacity-forecast", system=data.SYSTEM, date_from=date(2024, 3, 1),
                            date_to=date(2024, 3, 31))
    assert [(r["entity"], r["subject"], r["peak_busy_last"], r["slope_per_day"], r["crossing_date"],
             r["busy_if_one_halted"]) for r in cf] == [
        ("cpu", "0", 40, -4, None, 50), ("cpu", "1", 10, None, None, 50), ("disc", "$DATA1", 60, None, None, None)]


def _terminal(db, name: str, start, minutes: int, transactions: int, response_seconds: float) -> None:
    db.interval("A", "terminal", 0, start, minutes, {"line_name": "$ATM1", "subdev_name": name},
                transactions=transactions, response_time=round(response_seconds * data.M))


def test_transaction_resource_response_times_from_terminal_records(db, conn) -> None:
    t = data.t
    # (transactions, total response s) per terminal interval; record means 2.0, 1.5, 0.5, 10, 1.0
    _terminal(db, "A", t(10, 7), 30, 1, 2)
    _terminal(db, "A", t(10, 7, 30), 30, 2, 3)
    _terminal(db, "B", t(10, 7), 30, 4, 2)
    _terminal(db, "B", t(10, 7, 30), 30, 1, 10)
    _terminal(db, "C", t(10, 7), 60, 0, 0)          # no transaction: no sample
    _terminal(db, "C", t(10, 8), 60, 12, 12)
    _terminal(db, "C", t(11, 8), 60, 1, 99)         # outside the window
    # a line's records are ignored while its terminals are measured
    db.interval("A", "line", 0, t(10, 7), 60, {"device_name": "$ATM1", "pin": 9},
                transactions=100, response_time=100 * data.M)
    db.note_and_condense(t(10, 7), t(11, 8))             # as the collector does after every slice
    rows = reports.run_report(conn, "transaction-resource", system=data.SYSTEM, **WINDOW)
    total = next(r for r in rows if r["component"] == "total")
    # 20 transactions, 29 s of response: average 1.45 s. Sorted by record mean, transactions
    # accumulate 4 (0.5 s), 16 (1.0), 18 (1.5), 19 (2.0), 20 (10): 95 % of 20 = 19 -> 2.0 s.
    assert (total["transactions"], total["response_seconds_avg"], total["response_seconds_p95"],
            total["response_source"], total["response_transactions_per_sample"]) == (20, D("1.45"), 2, "terminal", 4)
    # CPU busy 5,220 s over 12,600 s of CPU records (not measurement B's half hour of CPU 0 at
    # 08:00: measurement A measured that whole hour)
    assert total["cpu_ms_per_transaction"] == 261000
    assert round(total["cpu_utilization_percent"], 6) == round(D(5220 * 100) / 12600, 6)
    assert all(r["response_seconds_p95"] == 2 for r in rows)
    # a chosen process's MESSAGES-RECEIVED as the transactions leaves the response lines alone
    by_proc = reports.run_report(conn, "transaction-resource", system=data.SYSTEM, transaction_process="$S%",
                                 **WINDOW)
    assert {(r["transactions"], r["response_seconds_p95"]) for r in by_proc} == {(200, 2)}

    text = reports.render_text("transaction-resource", rows, {"system": data.SYSTEM, **WINDOW}).splitlines()
    assert text[0].strip() == "TRANSACTION RESOURCE REPORT"
    body = [line.split("  ") for line in text]
    labels = [line.strip() for line in text[text.index(next(x for x in text if x.startswith("---"))) + 1:]
              if line.strip()]
    assert [x.split("  ")[0].strip() for x in labels] == [
        "TOTAL", "SYSTEM OVERHEAD", "APPLICATION SERVERS", "OTHER PROCESSES", "AVERAGE RESPONSE (S)",
        "95 % RESPONSE (S)", "TRANSACTIONS", "TRANSACTIONS/S PER CPU", "TOTAL CPU UTILISATION (%)"]
    assert body and next(x for x in labels if x.startswith("TOTAL ")).split()[1:3] == ["261000.0", "100.0"]
    p95 = next(x for x in labels if x.startswith("95 %")).split()
    assert p95[4:] == ["2.00", "(TERMINAL", "RECORDS,", "4.0", "TRANSACTIONS", "PER", "RECORD)"]
    assert next(x for x in labels if x.startswith("TOTAL CPU")).split()[-1] == "41.4"


def test_transaction_response_falls_back_to_line_records(db, conn) -> None:
    t = data.t
    db.interval("A", "line", 0, t(12, 7), 60, {"device_name": "$X25A", "pin": 9},
                transactions=10, response_time=25 * data.M)
    db.interval("A", "line", 0, t(12, 8), 60, {"device_name": "$X25A", "pin": 9},
                transactions=30, response_time=15 * data.M)
    db.note_and_condense(t(12, 7), t(12, 8))
    rows = reports.run_report(conn, "transaction-resource", system=data.SYSTEM,
                              from_at=t(12, 0), to_at=t(13, 0))
    # record means 2.5 s (10 transactions) and 0.5 s (30): 95 % of 40 = 38 is reached at 2.5 s
    assert {(r["transactions"], r["response_seconds_avg"], r["response_seconds_p95"], r["response_source"],
             r["response_transactions_per_sample"]) for r in rows} == {(40, 1, D("2.5"), "line", 20)}
    empty = reports.run_report(conn, "transaction-resource", system=data.SYSTEM, from_at=t(14, 0), to_at=t(15, 0))
    assert {(r["transactions"], r["response_seconds_p95"], r["response_source"]) for r in empty} == {(None, None, None)}
    assert "(NO RESPONSE TIMES MEASURED)" in reports.render_text(
        "transaction-resource", empty, {"system": data.SYSTEM, "from_at": t(14, 0), "to_at": t(15, 0)})


def test_rising_load_crosses_capacity_on_the_computed_date(db, conn) -> None:
    for day, busy in ((21, 50), (22, 55)):   # daily peaks 40 (03-19), 50 (03-20), 55 (03-21): shift days
        db.cpu("A", 0, data.t(day, 7), 60, busy=busy)
    db.note_and_condense(data.t(21, 7), data.t(22, 7))
    cf = reports.run_report(conn, "capacity-forecast", system=data.SYSTEM, date_from=date(2024, 3, 19),
                            date_to=date(2024, 3, 21), capacity=70)
    cpu0 = next(r for r in cf if r["subject"] == "0")
    # least squares through (0, 40), (1, 50), (2, 55): slope 7.5, intercept 40.833..; 70 at day 3.89 -> +4
    assert (cpu0["slope_per_day"], cpu0["crossing_date"]) == (D("7.5"), date(2024, 3, 23))
    assert cpu0["crossing_early"] < cpu0["crossing_date"] < cpu0["crossing_late"]


def test_unknown_system_is_a_clear_error(db, conn) -> None:
    with pytest.raises(reports.ReportError, match=r"unknown system \\NOPE; system: one of .*\\TEST"):
        reports.run_report(conn, "threshold", system="\\NOPE", day=date(2024, 3, 9))


@pytest.mark.parametrize("name, kwargs, message", [
    ("nosuch", {}, "unknown report 'nosuch'; reports: baseline-week, busy-process"),
    ("cpu-trend", {"date_from": "2024-02-01", "date_to": "2024-01-01"}, "date_from 2024-02-01 is after date_to"),
    ("threshold", {"day": "2024-13-01"}, "--date '2024-13-01' is not a date"),
    ("threshold", {}, "needs --date"),
])
def test_cli_parameter_errors(name, kwargs, message) -> None:
    with pytest.raises(reports.ReportError, match=message):
        build_params(name, system="\\X", day=kwargs.get("day"), date_from=kwargs.get("date_from"),
                     date_to=kwargs.get("date_to"), shift=None, extra={})


def test_formats() -> None:
    assert reports.fmt(D("0.2"), "f1") == ".2" and reports.fmt(D("85.25"), "f1") == "85.2"
    rows = [{"a": D("1.50"), "b": date(2024, 1, 2)}]
    assert reports.render_csv(rows) == "a,b\n1.5,2024-01-02\n"
    assert reports.render_csv([{"cpu": 1, "broken": ["busy_max > 70", "qlen_max > 2"]}]) == (
        "cpu,broken\n1,busy_max > 70; qlen_max > 2\n")  # the limits an hour broke: one cell, no Python list
    assert reports.render_json(rows) == '[\n {\n  "a": 1.5,\n  "b": "2024-01-02"\n }\n]'


def test_cli_takes_the_transaction_process_and_refuses_options_a_report_has_not(fresh_database, monkeypatch) -> None:
    import csv
    import io

    import psycopg
    from typer.testing import CliRunner

    from cli.main import app
    from core import schema as runner

    url = fresh_database("_report_cli")
    runner.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        data.load(c)
        c.commit()
    monkeypatch.setenv("DATABASE_URL", url)
    cli = CliRunner()
    r = cli.invoke(app, ["report", "transaction-resource", "--system", data.SYSTEM, "--date", "2024-03-10",
                         "--transaction-process", "$S%", "--format", "csv"])
    assert r.exit_code == 0, r.output
    rows = {row["component"]: row for row in csv.DictReader(io.StringIO(r.output))}
    assert {row["transactions"] for row in rows.values()} == {"200"} and float(rows["server"]["cpu_ms_per_transaction"]) == 5400
    r = cli.invoke(app, ["report", "threshold", "--system", data.SYSTEM, "--date", "2024-03-09",
                         "--transaction-process", "$S%"])
    assert r.exit_code == 2 and "report threshold takes no --transaction-process" in r.output


def test_a_system_may_be_named_without_its_backslash_or_upper_case(db, conn) -> None:
    want = conn.execute("SELECT system_id FROM _measure.system WHERE system_name = %s", (data.SYSTEM,)).fetchone()[0]
    bare = data.SYSTEM.lstrip("\\")
    for name in (data.SYSTEM, data.SYSTEM.lower(), bare, bare.lower(), f" {bare} "):
        assert conn.execute("SELECT measure.system_id_of(%s)", (name,)).fetchone()[0] == want, name
    with pytest.raises(psycopg.errors.NoDataFound):
        conn.execute("SELECT measure.system_id_of('\\\\NOSUCH')")


def test_a_range_without_data_is_no_data_not_nothing_broken(db, conn) -> None:
    """An empty report of a range in which the system has a measured hour says what the report
    says when nothing is broken; of a range without any, NO DATA with the span the data covers."""
    quiet = {"system": data.SYSTEM, "day": date(2024, 3, 9), "shift": 2}
    assert reports.run_report(conn, "threshold", **quiet) == []
    assert reports.no_data(conn, "threshold", {**quiet, "shift": 2}) is None
    empty = {"system": data.SYSTEM, "day": date(2025, 6, 1), "shift": None}
    assert reports.run_report(conn, "threshold", **empty) == []
    note = reports.no_data(conn, "threshold", empty)
    assert note is not None and note.startswith(f"NO DATA: {data.SYSTEM} has no measured hour on 2025-06-01 "
                                                "(its data runs from 2024-03-")
    text = reports.render("threshold", [], empty, "text", note)
    assert note in text and "NO THRESHOLD VIOLATIONS" not in text
    window = {"system": data.SYSTEM, "from_at": datetime(2030, 1, 1, tzinfo=UTC),
              "to_at": datetime(2030, 1, 2, tzinfo=UTC), "measurement": None}
    assert reports.no_data(conn, "process-summary", window).startswith("NO DATA")
    assert "NO DATA" in reports.render("transaction-resource", [], {**window, "transaction_process": None}, "text",
                                       reports.no_data(conn, "transaction-resource", window))
    assert reports.no_data(conn, "cpu-trend", {"system": data.SYSTEM, "date_from": date(2024, 3, 1),
                                                "date_to": date(2024, 3, 31)}) is None


# every option of every report, through the command line, against the real database
OPTION_VALUES = {"shift": "3", "cpu": "0", "pin": "5", "measurement": "1", "capacity": "80",
                 "transaction_process": "$S%", "min_cpu_seconds": "1", "max_priority": "250",
                 "severity": "major"}
WINDOW_ARGS = {"day": ["--date", "2024-03-09"], "range": ["--from", "2024-03-01", "--to", "2024-03-31"],
               "time": ["--from", "2024-03-10T00:00", "--to", "2024-03-11T00:00"]}


@pytest.fixture(scope="module")
def report_db(fresh_database) -> str:
    import psycopg

    from core import schema as runner

    url = fresh_database("_report_options")
    runner.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        data.load(c)
        c.commit()
    return url


@pytest.mark.parametrize("name", sorted(reports.REPORTS))
def test_every_report_option_runs_against_the_database(report_db, monkeypatch, name) -> None:
    """Each report with every option it takes set (a value that selects data), in every format:
    exit 0 and a parsable answer, never a database error (a Python float or a small int once
    reached the SQL functions as double precision / smallint: 'function does not exist')."""
    import json

    from typer.testing import CliRunner

    from cli.main import app

    monkeypatch.setenv("DATABASE_URL", report_db)
    rep = reports.REPORTS[name]
    opts = [arg for key in rep.params if key in OPTION_VALUES
            for arg in (f"--{key.replace('_', '-')}", OPTION_VALUES[key])]
    base = ["report", name, "--system", data.SYSTEM, *WINDOW_ARGS[rep.window], *opts]
    for fmt in ("text", "json", "csv"):
        r = CliRunner().invoke(app, [*base, "--format", fmt])
        assert r.exit_code == 0, (fmt, r.output)
        if fmt == "json":
            assert isinstance(json.loads(r.stdout), list)
    if name == "busy-process":  # the options select: a lower CPU-seconds floor lists more processes
        strict = CliRunner().invoke(app, [*base[:-4], "--format", "json"])
        assert len(json.loads(strict.stdout)) <= len(json.loads(CliRunner().invoke(app, [*base, "--format", "json"]).stdout))


def test_a_shifts_own_threshold_changes_that_shifts_hours_only(db, conn) -> None:
    """Per shift, the most specific row decides: the system's row for the shift, else the
    system's row for every shift, else the default's for the shift, else the default's for
    every shift. A system's busy_max > 85 for shift 3 changes shift 3's hours (80 % is no longer
    broken, 90 % still is) and nothing of shift 2's (the default 70 still holds there)."""
    def broken(shift: int, day: date = date(2024, 3, 9)) -> list[tuple[str, list[str]]]:
        return [(r["time_of_day"], [b for b in r["broken"] if b.startswith("busy_max")])
                for r in reports.run_report(conn, "threshold", system=data.SYSTEM, day=day, shift=shift)]

    sid = conn.execute("SELECT system_id FROM _measure.system WHERE system_name = %s", (data.SYSTEM,)).fetchone()[0]
    db.cpu("A", 0, data.t(10, 23), 60, busy=75)   # 16:00 PDT: shift 2 of 2024-03-10, over the default 70
    db.note_and_condense(data.t(10, 23), data.t(11, 0))
    before3, before2 = broken(3), broken(2, date(2024, 3, 10))
    assert before2 and all(b == ["busy_max > 70"] for _, b in before2), before2  # shift 2 breaks the default
    assert before3 == [("23:00", ["busy_max > 70"]), ("03:00", ["busy_max > 70"])]
    conn.execute("INSERT INTO _measure.threshold (system_id, entity, item, operator, limit_value, shift_no, help)"
                 " VALUES (%s, 'cpu', 'busy_max', '>', 85, 3, 'shift 3 only')", (sid,))
    assert broken(3) == [("23:00", ["busy_max > 85"])]                # 03:00 (80 %) breaks nothing now
    assert broken(2, date(2024, 3, 10)) == before2                    # shift 2 keeps the default
    listed = {(r[4], r[5], r[9]) for r in conn.execute(
        "SELECT * FROM _measure.threshold_list(%s) WHERE entity = 'cpu' AND item = 'busy_max'", (data.SYSTEM,))}
    assert listed == {(None, 70, "default (replaced in shift 3)"), (3, 85, "system")}
    # a system row for every shift then replaces the default everywhere; shift 3 keeps its own
    conn.execute("INSERT INTO _measure.threshold (system_id, entity, item, operator, limit_value, help)"
                 " VALUES (%s, 'cpu', 'busy_max', '>', 95, 'every shift')", (sid,))
    assert broken(3) == [("23:00", ["busy_max > 85"])]
    listed = {(r[4], r[5], r[8], r[9]) for r in conn.execute(
        "SELECT * FROM _measure.threshold_list(%s) WHERE entity = 'cpu' AND item = 'busy_max'", (data.SYSTEM,))}
    assert listed == {(None, 70, False, "default (replaced)"), (None, 95, True, "system"), (3, 85, True, "system")}
    stored = broken(3)
    conn.execute("DELETE FROM _measure.breach_state")                 # evaluated afresh: the same
    assert broken(3) == stored
