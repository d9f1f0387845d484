"""Automatic analysis (schema/idempotent/060-analysis.sql, docs/analysis.md): baselines learned
when hours are condensed, exceptions, the week against its baseline, and the health verdict.

The data set: system \\ANA in Asia/Tokyo (UTC+9, no DST), CPUs 0 and 1 measured one local hour
a day, 10:00-11:00, for the 35 days Monday 2024-04-01 to Sunday 2024-05-05 (one 60-minute
interval each). CPU 1 is 20 % busy every day; CPU 0 is 40 % busy every day except Wednesday
2024-04-24 (90 %), Wednesday 2024-05-01 (90 %) and Thursday 2024-05-02 (55 %). With the
defaults (4 weeks, minor 3, major 5, relative floor 0.25, CPU busy floor 10) a constant 40 %
learns median 40 and MAD 0, so scale = max(10, 0.25 x 40) / 3 = 10/3: the minor band is 30-50,
55 % is 4.5 scales above (minor), 90 % 15 (major). On 2024-05-01 only, a process $BAT at
priority 190 (60 % busy) and a line $L1 (60 % read busy) are measured in CPU 0's hour, and the
CPUs count 40 disc I/Os per transaction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import psycopg
import pytest

from core import reports
from core.catalog import load_catalog

SYSTEM = "\\ANA"
TZ = ZoneInfo("Asia/Tokyo")
FIRST = date(2024, 4, 1)
DAYS = 35
CAT = load_catalog()
M = 1_000_000
SPECIAL = {date(2024, 4, 24): 90, date(2024, 5, 1): 90, date(2024, 5, 2): 55}


def hour_of(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, 10, tzinfo=TZ)


def cpu_hours(conn: psycopg.Connection, name: str, number: int,
              counters_of: Callable[[int, date], dict[str, int]]) -> tuple[int, int]:
    """A system `name` (Asia/Tokyo) with CPUs 0 and 1 measured 10:00-11:00 local on each of the
    DAYS days from FIRST, counters_of(cpu, day) their counters (others 0), hours noted for
    condensing; (system_id, measurement_id)."""
    conn.execute("SELECT _measure.system_add(%s, %s, 'Asia/Tokyo', 'C30', '[{\"cpu\": null, \"cpu_type\": \"VLX\"}]')",
                 (name, number))
    sys_id = conn.execute("SELECT system_id FROM _measure.system WHERE system_name = %s", (name,)).fetchone()[0]
    meas = conn.execute("INSERT INTO _measure.measurement (system_id, name, contab, state) "
                        "VALUES (%s, 'ANALYSE', '{}', 'stopped') RETURNING measurement_id", (sys_id,)).fetchone()[0]
    cpu = CAT.entity("cpu")
    start = hour_of(FIRST)
    with conn.cursor() as cur:
        for n in (0, 1):
            ent = cur.execute("INSERT INTO _measure.entity (system_id, type_code, key, ids, cpu, first_seen_at) "
                              "VALUES (%s, %s, %s, %s, %s, %s) RETURNING entity_id",
                              (sys_id, cpu.code, f"cpu={n}", f'{{"cpu": {n}}}', n, start)).fetchone()[0]
            for k in range(DAYS):
                day = FIRST + timedelta(days=k)
                counters = [0] * len(cpu.counters)
                for counter, value in counters_of(n, day).items():
                    counters[cpu.index(counter)] = value
                at = hour_of(day)
                cur.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, "
                            "to_at, delta_us, closing_kind, system_id, type_code, cpu, counters) "
                            "VALUES (%s, %s, %s, %s, %s, %s, 3, %s, %s, %s, %s)",
                            (meas, ent, start, at, at + timedelta(hours=1), 3600 * M, sys_id, cpu.code, n, counters))
                cur.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)", (sys_id, at, at))
    return sys_id, meas


def load(conn: psycopg.Connection) -> int:
    def counters_of(n: int, day: date) -> dict[str, int]:
        c = {"cpu_busy_time": (20 if n == 1 else SPECIAL.get(day, 40)) * 36 * M}
        if day == date(2024, 5, 1):  # 40 disc I/Os per transaction on the verdict's day (both CPUs)
            c |= {"disc_ios": 72_000, "transactions": 1_800}
        return c

    sys_id, meas = cpu_hours(conn, SYSTEM, 18, counters_of)
    start = hour_of(FIRST)
    with conn.cursor() as cur:
        # on the verdict's day only (nothing to learn from: not judged), in CPU 0's hour: a
        # process at priority 190 60 % busy, a line 60 % read busy
        at = hour_of(date(2024, 5, 1))
        for entity, key, ids, counter in (
                ("process", "p", '{"cpu": 0, "pin": 300, "process_name": "$BAT", "program_file_name": "$A.B.C", '
                                 '"priority": 190}', "cpu_busy_time"),
                ("line", "l", '{"device_name": "$L1", "cpu": 0, "pin": 10}', "read_busy_time")):
            et = CAT.entity(entity)
            ent = cur.execute("INSERT INTO _measure.entity (system_id, type_code, key, ids, cpu, first_seen_at) "
                              "VALUES (%s, %s, %s, %s, 0, %s) RETURNING entity_id",
                              (sys_id, et.code, key, ids, start)).fetchone()[0]
            counters = [0] * len(et.counters)
            counters[et.index(counter)] = 60 * 36 * M
            cur.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, "
                        "to_at, delta_us, closing_kind, system_id, type_code, cpu, counters) "
                        "VALUES (%s, %s, %s, %s, %s, %s, 3, %s, %s, 0, %s)",
                        (meas, ent, start, at, at + timedelta(hours=1), 3600 * M, sys_id, et.code, counters))
    assert conn.execute("SELECT _measure.condense(%s::smallint)", (sys_id,)).fetchone() == (DAYS,)
    return sys_id


@pytest.fixture
def sys_id(conn) -> int:
    return load(conn)


def exceptions(conn, severity: str | None = None) -> list[tuple]:
    rows = reports.run_report(conn, "exceptions", system=SYSTEM, from_at=hour_of(FIRST),
                              to_at=hour_of(FIRST + timedelta(days=DAYS)), severity=severity)
    return [(str(r["local_hour"]), r["entity"], r["subject"], r["item"], r["value"], r["baseline"],
             r["band_low"], r["band_high"], round(r["deviation"], 9), r["severity"], r["direction"], r["weeks"])
            for r in rows]


def test_a_constant_history_flags_exactly_its_outlier_hours(sys_id, conn) -> None:
    assert exceptions(conn) == [
        # learned from the 3 weeks before it (the first week has none)
        ("2024-04-24 10:00:00", "cpu", "0", "busy", 90.0, 40.0, 30.0, 50.0, 15.0, "major", "above", 3),
        # 40, 40, 40, 90: median 40, MAD 0 (the outlier did not move the baseline)
        ("2024-05-01 10:00:00", "cpu", "0", "busy", 90.0, 40.0, 30.0, 50.0, 15.0, "major", "above", 4),
        ("2024-05-02 10:00:00", "cpu", "0", "busy", 55.0, 40.0, 30.0, 50.0, 4.5, "minor", "above", 4),
    ]
    assert [r[0] for r in exceptions(conn, "major")] == ["2024-04-24 10:00:00", "2024-05-01 10:00:00"]
    # the first week is stored, but has nothing to learn from: not judged
    assert conn.execute("SELECT count(*), count(severity) FROM _measure.hour_baseline "
                        "WHERE system_id = %s AND entity = 'cpu' AND item = 'busy' AND hour_at < %s",
                        (sys_id, hour_of(date(2024, 4, 8)))).fetchone() == (14, 0)


def test_a_holiday_is_neither_learned_nor_judged_and_a_calendar_change_recomputes(sys_id, conn) -> None:
    conn.execute("SELECT _measure.holiday_set(%s, '2024-04-24', 'Showa')", (SYSTEM,))
    assert exceptions(conn) == [
        # 2024-04-24 is left out: learned from the 3 other weeks
        ("2024-05-01 10:00:00", "cpu", "0", "busy", 90.0, 40.0, 30.0, 50.0, 15.0, "major", "above", 3),
        ("2024-05-02 10:00:00", "cpu", "0", "busy", 55.0, 40.0, 30.0, 50.0, 4.5, "minor", "above", 4),
    ]
    assert conn.execute("SELECT holiday, severity FROM _measure.hour_baseline WHERE system_id = %s "
                        "AND hour_at = %s AND entity = 'cpu' AND subject = '0' AND item = 'busy'",
                        (sys_id, hour_of(date(2024, 4, 24)))).fetchone() == (True, None)
    conn.execute("SELECT _measure.holiday_remove(%s, '2024-04-24')", (SYSTEM,))
    assert [r[-1] for r in exceptions(conn)] == [3, 4, 4]


def test_the_settings_of_a_system_change_what_is_learned(sys_id, conn) -> None:
    conn.execute("INSERT INTO _measure.analysis_setting (system_id, weeks, minor, major) VALUES (%s, 1, 4, 20)",
                 (sys_id,))
    conn.execute("SELECT _measure.analysis_rebuild(%s::smallint)", (sys_id,))
    # one week learned, scale = max(10, 0.25 x 40) / 4 = 2.5: 90 is 20 scales above (not beyond
    # the major 20: minor), 55 is 6; 2024-05-01 learns 90 from 2024-04-24 and is no exception
    assert [(r[0], r[5], r[8], r[9], r[10], r[11]) for r in exceptions(conn)] == [
        ("2024-04-24 10:00:00", 40.0, 20.0, "minor", "above", 1),
        ("2024-05-02 10:00:00", 40.0, 6.0, "minor", "above", 1),
    ]


def test_the_week_against_its_baseline(sys_id, conn) -> None:
    rows = reports.run_report(conn, "baseline-week", system=SYSTEM, date_from=date(2024, 4, 29),
                              date_to=date(2024, 5, 5))
    assert [(r["entity"], r["subject"], r["item"], r["hours"], r["hours_above"], r["hours_below"], r["major_hours"],
             round(r["largest_deviation"], 9), str(r["largest_at"]), r["largest_value"], r["largest_baseline"],
             r["weeks_min"]) for r in rows] == [
        ("cpu", "0", "busy", 7, 2, 0, 1, 15.0, "2024-05-01 10:00:00", 90.0, 40.0, 4)]
    text = reports.render_text("baseline-week", rows, {"system": SYSTEM, "date_from": date(2024, 4, 29),
                                                       "date_to": date(2024, 5, 5)})
    assert "THE WEEK AGAINST ITS BASELINE" in text and "2024-05-01 10:00:00" in text


def test_the_health_verdict_of_a_day(sys_id, conn) -> None:
    rows = reports.run_report(conn, "health-verdict", system=SYSTEM, day=date(2024, 5, 1))
    got = {r["indicator"]: (r["verdict"], r["evidence"], r["subject"]) for r in rows}
    assert list(got) == ["cpu_over_utilised", "cpu_queuing", "cpu_load_balance", "disc_over_utilised",
                         "disc_queuing", "line_over_utilised", "busy_high_priority_process",
                         "transient_processes", "dynamic_file_opens", "file_ios_per_transaction"]
    assert got == {
        "cpu_over_utilised": (True, "CPU 0: 90.0 % busy at 10:00 (limit 70); 1 hour(s) above", "0"),
        "cpu_queuing": (False, "CPU 0: 0.0 queue length at 10:00 (limit 2); 0 hour(s) above", "0"),
        "cpu_load_balance": (True, "CPU 0 averaged 90.0 % busy, CPU 1 20.0 %: spread 70.0 points (limit 20)", "0"),
        "disc_over_utilised": (False, "no disc measured", None),
        "disc_queuing": (False, "no disc measured", None),
        "line_over_utilised": (True, "$L1: 60.0 % read busy at 10:00 (limit 50); 1 hour(s) above", "$L1"),
        "busy_high_priority_process": (True, "$BAT (priority 190): 60.0 % of CPU at 10:00 (limit 50 %); "
                                             "1 process-hour(s) above", "$BAT"),
        "transient_processes": (False, "0 process(es) created lived less than 10 minutes (limit 24 a day)", None),
        "dynamic_file_opens": (False, "0 disc file(s) opened during the day, 0.000 per terminal transaction "
                                      "(limit 0.1 per transaction, at least 100)", None),
        "file_ios_per_transaction": (True, "144000 disc I/Os / 3600 terminal transactions = 40.0 per transaction "
                                           "(limit 30)", None),
    }
    # 100 - 20 (CPU over-utilised) - 10 (load balance) - 10 (line) - 10 (priority) - 5 (file I/Os)
    assert {r["score"] for r in rows} == {45}
    assert rows[0]["action"].startswith("Find the busiest processes")
    text = reports.render_text("health-verdict", rows, {"system": SYSTEM, "day": date(2024, 5, 1)})
    assert "SCORE:      45/100, 5 of 10 indicators show a problem" in text
    # the next day: only the imbalance (55 against 20: 35 points); nothing of the process or line
    rows = reports.run_report(conn, "health-verdict", system=SYSTEM, day=date(2024, 5, 2))
    assert [r["indicator"] for r in rows if r["verdict"]] == ["cpu_load_balance"] and rows[0]["score"] == 90
    assert {r["indicator"]: r["evidence"] for r in rows}["busy_high_priority_process"] == (
        "no application process at priority 150 to 199 was measured")


def test_a_report_parameter_out_of_its_choices_is_refused() -> None:
    with pytest.raises(reports.ReportError, match="severity 'all'.*minor or major"):
        reports.bind("exceptions", system=SYSTEM, from_at=hour_of(FIRST), to_at=hour_of(FIRST), severity="all")


def test_fewer_earlier_weeks_than_the_setting_are_said(sys_id, conn) -> None:
    def note(first: date) -> str | None:
        params = reports.bind("exceptions", system=SYSTEM, from_at=hour_of(first),
                              to_at=hour_of(first + timedelta(days=7)))
        assert reports.run_report(conn, "exceptions", **params) == []
        return reports.no_baseline(conn, "exceptions", params)

    assert note(FIRST) == ("NO EXCEPTIONS: no hour has a baseline yet (7 hour(s) stored, none judged): \\ANA has "
                           "no earlier week to learn from (the same local hour of up to 4 earlier weeks, "
                           "holidays left out)")
    assert note(FIRST + timedelta(days=7)) == ("NO EXCEPTIONS (7 hour(s) judged, baselines learned from 1 to 1 "
                                               "of 4 earlier weeks)")
    assert reports.no_baseline(conn, "threshold", {"system": SYSTEM}) is None


# ---------------------------------------------------------------- growth and queues
# \GRO (Asia/Tokyo), the same hour 10:00-11:00 every day of the same 35 days. CPU 0 grows 10
# points a week (20, 30, 40, 50 % in weeks 0-3, 60 % in week 4) except on the Monday of week 4,
# 2024-04-29, when it falls back to 30 %. CPU 1 is 20 % busy with a ready queue of 1 every day
# except Tuesday 2024-04-30 (5) and Wednesday 2024-05-01 (9) and Monday 2024-04-29 (3).
GROWTH = "\\GRO"
QUEUE = {date(2024, 4, 29): 3, date(2024, 4, 30): 5, date(2024, 5, 1): 9}


def load_growth(conn: psycopg.Connection) -> int:
    def counters_of(n: int, day: date) -> dict[str, int]:
        if n == 1:
            return {"cpu_busy_time": 20 * 36 * M, "cpu_qtime": QUEUE.get(day, 1) * 3600 * M}
        busy = 30 if day == date(2024, 4, 29) else 20 + 10 * ((day - FIRST).days // 7)
        return {"cpu_busy_time": busy * 36 * M}

    sys_id, _ = cpu_hours(conn, GROWTH, 19, counters_of)
    assert conn.execute("SELECT _measure.condense(%s::smallint)", (sys_id,)).fetchone() == (DAYS,)
    return sys_id


def growth_exceptions(conn) -> list[tuple]:
    rows = reports.run_report(conn, "exceptions", system=GROWTH, from_at=hour_of(FIRST),
                              to_at=hour_of(FIRST + timedelta(days=DAYS)))
    return [(str(r["local_hour"]), r["subject"], r["item"], r["value"], round(r["baseline"], 9),
             round(r["band_low"], 9), round(r["band_high"], 9), round(r["deviation"], 9), r["severity"],
             r["direction"], r["weeks"]) for r in rows]


def test_the_baseline_follows_growth_and_judges_queues_by_ratio(conn) -> None:
    sys_id = load_growth(conn)
    ln = math.log
    q = ln(2.5) / 3  # the scale of a queue with no spread: a minor band of x 2.5 on (queue + floor 1)
    assert growth_exceptions(conn) == [
        # CPU 0 learns 20, 30, 40, 50: changes 10, 10, 10 a week, so the baseline is 60 (the
        # median of the weeks would be 35, and 30 % within its band), scale max(10, 0.25 x 60) / 3
        # = 5: 30 is 6 scales below
        ("2024-04-29 10:00:00", "0", "busy", 30.0, 60.0, 45.0, 75.0, -6.0, "major", "below", 4),
        # CPU 1's queue of 1, ln(1 + 1) on the log scale: the band is 2 / 2.5 - 1 to 2 x 2.5 - 1.
        # 3 is within it (judged by its difference, as before 240, it was 2 / (1 / 3) = 6 scales
        # above: major); 5 is ln(6 / 2) / q above, 9 ln(10 / 2) / q
        ("2024-04-30 10:00:00", "1", "qlen", 5.0, 1.0, -0.2, 4.0, round(ln(3) / q, 9), "minor", "above", 4),
        ("2024-05-01 10:00:00", "1", "qlen", 9.0, 1.0, -0.2, 4.0, round(ln(5) / q, 9), "major", "above", 4),
    ]
    # weeks 1-3 of CPU 0: 30 against 20 (one week learned, no trend: 3 scales, not beyond), 40
    # against 25 +/- MAD 5 (two weeks: no trend yet), 50 against the trend 50 (three weeks)
    assert conn.execute(
        "SELECT array_agg(round(median::numeric, 6) ORDER BY hour_at), array_agg(severity ORDER BY hour_at) "
        "FROM _measure.hour_baseline WHERE system_id = %s AND entity = 'cpu' AND subject = '0' AND item = 'busy' "
        "AND hour_at IN (%s, %s, %s)",
        (sys_id, hour_of(date(2024, 4, 8)), hour_of(date(2024, 4, 15)), hour_of(date(2024, 4, 22)))).fetchone() == (
        [Decimal(20), Decimal(25), Decimal(50)], [0, 0, 0])


def test_stored_verdicts_are_judged_again_by_the_current_method(conn) -> None:
    sys_id = load_growth(conn)
    before = growth_exceptions(conn)
    spoil = "UPDATE _measure.hour_baseline SET severity = 0, median = 0 WHERE system_id = %s"
    conn.execute(spoil, (sys_id,))
    assert growth_exceptions(conn) == []
    judged = conn.execute("SELECT _measure.analysis_rejudge(%s::smallint, ARRAY(SELECT DISTINCT hour_at "
                          "FROM _measure.hour_baseline WHERE system_id = %s))", (sys_id, sys_id)).fetchone()[0]
    assert judged == 4 * DAYS  # busy and queue of 2 CPUs, every hour
    assert growth_exceptions(conn) == before
    # `measuredb schema apply` (060-analysis.sql) judges the stored hours again once when their
    # verdicts were made by an earlier method (_measure.analysis_method, 240-baseline-trend.sql)
    assert conn.execute("SELECT _measure.analysis_upgrade()").fetchone() == (0,)
    conn.execute(spoil, (sys_id,))
    conn.execute("UPDATE _measure.analysis_method SET version = 1")
    assert conn.execute("SELECT _measure.analysis_upgrade()").fetchone()[0] >= 4 * DAYS
    assert growth_exceptions(conn) == before
    assert conn.execute("SELECT version FROM _measure.analysis_method").fetchone() == (2,)
