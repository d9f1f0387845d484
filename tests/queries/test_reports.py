"""Every report in queries/: exact rows from the hand-built data base of
tests/schema/test_tiers_data.py, the ENFORM text layout, and clear errors."""

from __future__ import annotations

import importlib.util
from datetime import UTC, date, datetime
from decimal import Decimal as D
from pathlib import Path

import pytest

from collector import reports
from collector.reports import build_params

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


def test_transaction_resource_and_capacity_forecast(db, conn) -> None:
    tr = {r["component"]: r for r in reports.run_report(
        conn, "transaction-resource", system=data.SYSTEM, transaction_process="$S%", **WINDOW)}
    # 200 transactions; servers 1080 s, FUP 1800 s ('other'), CPU busy 7020 s in all
    assert tr["server"]["cpu_ms_per_transaction"] == 5400 and tr["other"]["cpu_ms_per_transaction"] == 9000
    assert tr["system_overhead"]["cpu_seconds"] == 7020 - 1080 - 1800
    cf = reports.run_report(conn, "capacity-forecast", system=data.SYSTEM, date_from=date(2024, 3, 1),
                            date_to=date(2024, 3, 31))
    assert [(r["entity"], r["subject"], r["peak_busy_last"], r["slope_per_day"], r["crossing_date"],
             r["busy_if_one_halted"]) for r in cf] == [
        ("cpu", "0", 40, -4, None, 50), ("cpu", "1", 10, None, None, 50), ("disc", "$DATA1", 60, None, None, None)]


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
    ("nosuch", {}, "unknown report 'nosuch'; reports: busy-process"),
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
    assert reports.render_json(rows) == '[\n {\n  "a": 1.5,\n  "b": "2024-01-02"\n }\n]'
