"""Calendars (schema/110-calendar.sql, schema/idempotent/050-config.sql): weekday shifts, a
shift crossing midnight, holidays, effective-from dates and the truncation where two versions
meet, per-shift thresholds; each change recondenses exactly the shift days it alters, and bad
input is refused naming the field with nothing applied.

The data set: system \\CAL in Asia/Tokyo (UTC+9, no DST), CPU 0 measured every local hour of
Thursday 2024-04-04 to Monday 2024-04-08 (120 hours) with one 60-minute interval each, busy %
= the local hour (0 .. 23): a shift's average is the mean of its hour numbers. Without a
calendar the default shifts hold: 1 00-08 (avg 3.5), 2 08-16 (11.5), 3 16-24 (19.5).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal as D
from zoneinfo import ZoneInfo

import psycopg
import pytest

from core.catalog import load_catalog

SYSTEM = "\\CAL"
TZ = ZoneInfo("Asia/Tokyo")
FIRST = datetime(2024, 4, 4, tzinfo=TZ)   # Thursday, local midnight
HOURS = 120
CAT = load_catalog()
M = 1_000_000
WEEKDAYS = [{"shift_no": 1, "name": "day", "weekdays": [1, 2, 3, 4, 5], "begin": "07:00", "end": "15:00"},
            {"shift_no": 2, "name": "evening", "weekdays": [1, 2, 3, 4, 5], "begin": "15:00", "end": "23:00"},
            {"shift_no": 3, "name": "night", "weekdays": [1, 2, 3, 4, 5], "begin": "23:00", "end": "07:00"},
            {"shift_no": 4, "name": "weekend", "weekdays": [6, 7], "begin": "10:00", "end": "18:00"}]
DEFAULT_DAY = [(1, 8, 8, D("3.5"), 7, 0), (2, 8, 8, D("11.5"), 15, 8), (3, 8, 8, D("19.5"), 23, 16)]


def load(conn: psycopg.Connection) -> int:
    conn.execute("SELECT _measure.system_add(%s, 17, 'Asia/Tokyo', 'C30', '[{\"cpu\": null, \"cpu_type\": \"VLX\"}]')",
                 (SYSTEM,))
    sys_id = conn.execute("SELECT system_id FROM _measure.system WHERE system_name = %s", (SYSTEM,)).fetchone()[0]
    meas = conn.execute("INSERT INTO _measure.measurement (system_id, name, contab, state) "
                        "VALUES (%s, 'CPLNDAY1', '{}', 'stopped') RETURNING measurement_id", (sys_id,)).fetchone()[0]
    ent = conn.execute("INSERT INTO _measure.entity (system_id, type_code, key, ids, cpu, first_seen_at) "
                       "VALUES (%s, %s, 'cpu=0', '{\"cpu\": 0}', 0, %s) RETURNING entity_id",
                       (sys_id, CAT.entity("cpu").code, FIRST)).fetchone()[0]
    cpu = CAT.entity("cpu")
    with conn.cursor() as cur:
        for k in range(HOURS):
            start = FIRST + timedelta(hours=k)
            counters = [0] * len(cpu.counters)
            counters[cpu.index("cpu_busy_time")] = start.hour * 36 * M  # busy % = local hour
            cur.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, to_at, "
                        "delta_us, closing_kind, system_id, type_code, cpu, counters) "
                        "VALUES (%s, %s, %s, %s, %s, %s, 3, %s, %s, 0, %s)",
                        (meas, ent, FIRST, start, start + timedelta(hours=1), 3600 * M, sys_id, cpu.code, counters))
    conn.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)",
                 (sys_id, FIRST, FIRST + timedelta(hours=HOURS - 1)))
    assert conn.execute("SELECT _measure.condense(%s::smallint)", (sys_id,)).fetchone() == (HOURS,)
    return sys_id


@pytest.fixture
def sys_id(conn) -> int:
    return load(conn)


def shifts(conn) -> list[tuple]:
    """(day, shift, hours, shift_hours, busy avg, max, min) of every CPU shift row."""
    return conn.execute(
        "SELECT shift_day::text, shift_no, hours, shift_hours, busy_avg, busy_max, busy_min FROM measure.cpu_shift "
        "WHERE system_name = %s ORDER BY shift_day, shift_no", (SYSTEM,)).fetchall()


def default_days(*days: str) -> list[tuple]:
    return [(d, no, h, sh, avg, mx, mn) for d in days for no, h, sh, avg, mx, mn in DEFAULT_DAY]


def stamps(conn) -> dict[tuple, str]:
    """Where each shift-tier row is stored: a row rewritten in this transaction moves."""
    return {(d, no, item): ctid for d, no, item, ctid in conn.execute(
        "SELECT t.shift_day::text, t.shift_no, t.item, t.ctid::text FROM _measure.tier_shift t "
        "JOIN _measure.system s USING (system_id) WHERE s.system_name = %s AND t.entity = 'cpu'", (SYSTEM,))}


def rewritten_days(before: dict, after: dict) -> set[str]:
    return {k[0] for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def call(conn, sql: str, *args) -> dict:
    return conn.execute(sql, args).fetchone()[0]


def test_without_a_calendar_the_default_shifts_hold_every_day(sys_id, conn) -> None:
    assert shifts(conn) == default_days("2024-04-04", "2024-04-05", "2024-04-06", "2024-04-07", "2024-04-08")
    assert conn.execute("SELECT shift_no, name, begin_time::text, end_time::text FROM measure.shift "
                        "WHERE system_name = %s ORDER BY 1", (SYSTEM,)).fetchall() == [
        (1, "night", "00:00:00", "08:00:00"), (2, "day", "08:00:00", "16:00:00"), (3, "evening", "16:00:00", "24:00:00")]
    # the CPU type of the system shows in the hour view and the trend report
    assert conn.execute("SELECT DISTINCT cpu_type FROM measure.cpu_hour WHERE system_name = %s",
                        (SYSTEM,)).fetchall() == [("VLX",)]


def test_weekday_shifts_and_a_night_shift_recondense_exactly_the_days_they_change(sys_id, conn) -> None:
    before = stamps(conn)
    out = call(conn, "SELECT _measure.calendar_set(%s, '2024-04-06', %s)", SYSTEM, json.dumps(WEEKDAYS))
    # Saturday, Sunday and Monday change (Friday's last shift ends at midnight, before Saturday's
    # first begins): every hour of their old and new shifts, 3 x 24
    assert out["recondensed"] == {"days": 3, "hours": 72, "first_day": "2024-04-06", "last_day": "2024-04-08"}
    assert shifts(conn) == default_days("2024-04-04", "2024-04-05") + [
        ("2024-04-06", 4, 8, 8, D("13.5"), 17, 10),         # weekend 10-18
        ("2024-04-07", 4, 8, 8, D("13.5"), 17, 10),
        ("2024-04-08", 1, 8, 8, D("10.5"), 14, 7),          # Monday 07-15
        ("2024-04-08", 2, 8, 8, D("18.5"), 22, 15),         # 15-23
        ("2024-04-08", 3, 1, 8, 23, 23, 23),                # 23-07 crosses midnight: 1 hour measured
    ]
    assert rewritten_days(before, stamps(conn)) == {"2024-04-06", "2024-04-07", "2024-04-08"}
    # Sunday's hours outside 10-18 and Monday's before 07:00 belong to no shift; the month has
    # every shift number that is left, from the new rows
    # (shift 1: 3.5 x 16 h + 10.5 x 8 h) / 24 h; shift 3: (19.5 x 16 h + 23) / 17 h
    assert conn.execute("SELECT shift_no, shifts, hours, round(busy_avg, 4) FROM measure.cpu_month "
                        "WHERE system_name = %s ORDER BY shift_no", (SYSTEM,)).fetchall() == [
        (1, 3, 24, D("5.8333")), (2, 3, 24, D("13.8333")), (3, 3, 17, D("19.7059")), (4, 2, 16, D("13.5000"))]
    # setting the same calendar again changes nothing and recondenses nothing
    again = call(conn, "SELECT _measure.calendar_set(%s, '2024-04-06', %s)", SYSTEM, json.dumps(WEEKDAYS))
    assert again["recondensed"] == {"days": 0, "hours": 0, "first_day": None, "last_day": None}
    shown = call(conn, "SELECT _measure.calendar_show(%s)", SYSTEM)
    assert shown["base"]["source"] == "default" and shown["base"]["until"] == "2024-04-05"
    assert [(s["shift_no"], s["weekdays"], s["begin"], s["end"], s["crosses_midnight"])
            for s in shown["versions"][0]["shifts"]] == [
        (1, [1, 2, 3, 4, 5], "07:00", "15:00", False), (2, [1, 2, 3, 4, 5], "15:00", "23:00", False),
        (3, [1, 2, 3, 4, 5], "23:00", "07:00", True), (4, [6, 7], "10:00", "18:00", False)]


def test_a_holiday_takes_the_span_of_its_day_as_the_holiday_shift_or_no_shift(sys_id, conn) -> None:
    call(conn, "SELECT _measure.calendar_set(%s, '2024-04-06', %s, 9, 'holiday')", SYSTEM, json.dumps(WEEKDAYS))
    before = stamps(conn)
    out = call(conn, "SELECT _measure.holiday_set(%s, '2024-04-08', 'Spring holiday')", SYSTEM)
    # Monday's shifts ran 07:00 to Tuesday 07:00: now all holiday, measured 07:00-24:00
    assert out["recondensed"] == {"days": 1, "hours": 17, "first_day": "2024-04-08", "last_day": "2024-04-08"}
    assert [r for r in shifts(conn) if r[0] == "2024-04-08"] == [("2024-04-08", 9, 17, 24, 15, 23, 7)]
    assert rewritten_days(before, stamps(conn)) == {"2024-04-08"}
    assert conn.execute("SELECT day::text, name, shift_no FROM measure.holiday WHERE system_name = %s",
                        (SYSTEM,)).fetchall() == [("2024-04-08", "Spring holiday", 9)]
    # a holiday under the default shifts (no version: no holiday shift) has no shift at all
    out = call(conn, "SELECT _measure.holiday_set(%s, '2024-04-04', 'Founders day')", SYSTEM)
    assert out["recondensed"] == {"days": 1, "hours": 24, "first_day": "2024-04-04", "last_day": "2024-04-04"}
    assert [r for r in shifts(conn) if r[0] == "2024-04-04"] == []
    # removing a holiday brings its shifts back, recondensing that day only
    before = stamps(conn)
    out = call(conn, "SELECT _measure.holiday_remove(%s, '2024-04-08')", SYSTEM)
    assert out["recondensed"]["days"] == 1 and out["recondensed"]["hours"] == 17
    assert [r[1] for r in shifts(conn) if r[0] == "2024-04-08"] == [1, 2, 3]
    assert rewritten_days(before, stamps(conn)) == {"2024-04-08"}


def test_moving_the_effective_date_recondenses_exactly_the_days_between(sys_id, conn) -> None:
    call(conn, "SELECT _measure.calendar_set(%s, '2024-04-06', %s)", SYSTEM, json.dumps(WEEKDAYS))
    # the version now starts on Monday: Saturday and Sunday go back to the defaults
    call(conn, "SELECT _measure.calendar_set(%s, '2024-04-08', %s)", SYSTEM, json.dumps(WEEKDAYS))
    before = stamps(conn)
    out = call(conn, "SELECT _measure.calendar_remove(%s, '2024-04-06')", SYSTEM)
    assert out["recondensed"] == {"days": 2, "hours": 48, "first_day": "2024-04-06", "last_day": "2024-04-07"}
    assert rewritten_days(before, stamps(conn)) == {"2024-04-06", "2024-04-07"}
    assert shifts(conn)[:15] == default_days("2024-04-04", "2024-04-05", "2024-04-06", "2024-04-07") + [
        ("2024-04-08", 1, 8, 8, D("10.5"), 14, 7), ("2024-04-08", 2, 8, 8, D("18.5"), 22, 15),
        ("2024-04-08", 3, 1, 8, 23, 23, 23)]


def test_where_two_versions_meet_the_night_shift_ends_where_the_next_day_begins(sys_id, conn) -> None:
    night_first = [{"shift_no": 1, "begin": "07:00", "end": "15:00"}, {"shift_no": 2, "begin": "15:00", "end": "23:00"},
                   {"shift_no": 3, "begin": "23:00", "end": "07:00"}]
    out = call(conn, "SELECT _measure.calendar_set(%s, '2024-04-04', %s)", SYSTEM, json.dumps(night_first))
    # every day changes; Thursday's 00:00-07:00 is in no shift now (Wednesday has no data)
    assert out["recondensed"] == {"days": 5, "hours": 120, "first_day": "2024-04-04", "last_day": "2024-04-08"}
    midnight = [{"shift_no": 1, "begin": "00:00", "end": "08:00"}, {"shift_no": 2, "begin": "08:00", "end": "16:00"},
                {"shift_no": 3, "begin": "16:00", "end": "24:00"}]
    before = stamps(conn)
    out = call(conn, "SELECT _measure.calendar_set(%s, '2024-04-06', %s)", SYSTEM, json.dumps(midnight))
    # Friday's night shift now ends at Saturday 00:00, where Saturday's first shift begins:
    # Friday (07:00 to Saturday 07:00) and Saturday to Monday change, 17 + 3 x 24 hours
    assert out["recondensed"] == {"days": 4, "hours": 89, "first_day": "2024-04-05", "last_day": "2024-04-08"}
    assert rewritten_days(before, stamps(conn)) == {"2024-04-05", "2024-04-06", "2024-04-07", "2024-04-08"}
    assert [r for r in shifts(conn) if r[0] in ("2024-04-04", "2024-04-05")] == [
        ("2024-04-04", 1, 8, 8, D("10.5"), 14, 7), ("2024-04-04", 2, 8, 8, D("18.5"), 22, 15),
        ("2024-04-04", 3, 8, 8, D("5.5"), 23, 0),
        ("2024-04-05", 1, 8, 8, D("10.5"), 14, 7), ("2024-04-05", 2, 8, 8, D("18.5"), 22, 15),
        ("2024-04-05", 3, 1, 1, 23, 23, 23)]
    assert shifts(conn)[6:] == default_days("2024-04-06", "2024-04-07", "2024-04-08")


def test_thresholds_per_shift_and_what_they_refresh(sys_id, conn) -> None:
    def broken(day: str, shift=None) -> list[tuple]:
        return [(r[0], r[1], r[2]) for r in conn.execute(
            "SELECT time_of_day, shift_no, broken FROM measure.report_threshold(%s, %s, %s)",
            (SYSTEM, day, shift)).fetchall()]

    assert broken("2024-04-05") == []              # busy_max > 70 (Figure 9) never breaks here
    out = call(conn, "SELECT _measure.threshold_set(%s, 'cpu', 'busy_max', '>', 20)", SYSTEM)
    assert out["reevaluated"] == {"systems": 1, "hours": HOURS}
    assert out["threshold"] == {"system": SYSTEM, "entity": "cpu", "item": "busy_max", "operator": ">", "shift": None,
                                "limit": 20, "enabled": True, "help": ""}
    assert broken("2024-04-05") == [("21:00", 3, ["busy_max > 20"]), ("22:00", 3, ["busy_max > 20"]),
                                    ("23:00", 3, ["busy_max > 20"])]
    # a threshold of shift 3 replaces the one of every shift for the hours of shift 3 only
    call(conn, "SELECT _measure.threshold_set(%s, 'cpu', 'busy_max', '>', 22, 3)", SYSTEM)
    assert broken("2024-04-05") == [("23:00", 3, ["busy_max > 22"])]
    call(conn, "SELECT _measure.threshold_set(%s, 'cpu', 'busy_max', '>', 10, 2)", SYSTEM)
    assert broken("2024-04-05", 2) == [(f"{h:02d}:00", 2, ["busy_max > 10"]) for h in range(11, 16)]
    stored = conn.execute("SELECT * FROM measure.report_threshold(%s, '2024-04-05')", (SYSTEM,)).fetchall()
    # the evaluation without the stored violations gives the same lines
    conn.execute("DELETE FROM _measure.breach_state WHERE system_id = %s", (sys_id,))
    assert conn.execute("SELECT * FROM measure.report_threshold(%s, '2024-04-05')", (SYSTEM,)).fetchall() == stored
    conn.execute("SELECT _measure.threshold_rebuild(%s::smallint)", (sys_id,))
    # a calendar change moves hours between shifts: their violations follow
    call(conn, "SELECT _measure.calendar_set(%s, '2024-04-05', %s)", SYSTEM, json.dumps(
        [{"shift_no": 3, "name": "all day", "begin": "00:00", "end": "24:00"}]))
    assert broken("2024-04-05") == [(f"{h:02d}:00", 3, ["busy_max > 22"]) for h in (23,)]
    assert conn.execute("SELECT count(*) FROM _measure.hour_breach b WHERE b.system_id = %s AND b.hour_at >= %s",
                        (sys_id, datetime(2024, 4, 5, tzinfo=TZ))).fetchone() == (4,)   # 23:00 of Fri .. Mon
    assert conn.execute("SELECT shift_no, broken_hours FROM _measure.threshold_rollup WHERE system_id = %s "
                        "AND grain = 'month' AND item = '*' ORDER BY 1", (sys_id,)).fetchall() == [
        (1, 0), (2, 5), (3, 5)]   # Thursday: 11-15 (shift 2), 23:00 (shift 3); Friday on: 23:00 x 4
    out = call(conn, "SELECT _measure.threshold_remove(%s, 'cpu', 'busy_max', '>', 3)", SYSTEM)
    assert out["reevaluated"] == {"systems": 1, "hours": HOURS}
    assert broken("2024-04-06") == [("21:00", 3, ["busy_max > 20"]), ("22:00", 3, ["busy_max > 20"]),
                                    ("23:00", 3, ["busy_max > 20"])]


@pytest.mark.parametrize(("sql", "args", "field", "message"), [
    ("SELECT _measure.calendar_set(%s, '2024-04-06', %s)",
     [{"shift_no": 1, "begin": "07:30", "end": "15:00"}], "shifts[0].begin", "07:30 is not a whole hour"),
    ("SELECT _measure.calendar_set(%s, '2024-04-06', %s)",
     [{"shift_no": 1, "begin": "07:00", "end": "25:00"}], "shifts[0].end", "not a time of day"),
    ("SELECT _measure.calendar_set(%s, '2024-04-06', %s)",
     [{"shift_no": 10, "begin": "07:00", "end": "15:00"}], "shifts[0].shift_no", "no shift number"),
    ("SELECT _measure.calendar_set(%s, '2024-04-06', %s)",
     [{"shift_no": 1, "begin": "07:00", "end": "15:00", "weekdays": [0]}], "shifts[0].weekdays", "ISO weekdays"),
    ("SELECT _measure.calendar_set(%s, '2024-04-06', %s)", [], "shifts", "at least one shift"),
    ("SELECT _measure.calendar_set(%s, '2024-04-06', %s)",
     [{"shift_no": 1, "begin": "08:00", "end": "16:00"}, {"shift_no": 2, "begin": "15:00", "end": "23:00"}],
     "shifts[1]", "shift 2 on Monday (15:00-23:00) overlaps shift 1 on Monday (08:00-16:00)"),
    ("SELECT _measure.calendar_set(%s, '2024-04-06', %s)",   # Friday's night shift runs into Saturday's
     [{"shift_no": 3, "weekdays": [5], "begin": "22:00", "end": "06:00"},
      {"shift_no": 1, "weekdays": [6], "begin": "05:00", "end": "13:00"}],
     "shifts[1]", "shift 1 on Saturday (05:00-13:00) overlaps shift 3 on Friday (22:00-06:00)"),
    ("SELECT _measure.calendar_set(%s, '2024-04-06', %s, 1)",
     [{"shift_no": 1, "begin": "08:00", "end": "16:00"}], "holiday_shift", "is a regular shift"),
    ("SELECT _measure.threshold_set(%s, 'cpu', 'busy_maxx', '>', 70)", None, "item", "no item of measure.cpu_hour"),
    ("SELECT _measure.threshold_set(%s, 'cpu', 'busy_max', '=>', 70)", None, "operator", "none of >, >=, <, <="),
    ("SELECT _measure.threshold_set(%s, 'cpu', 'busy_max', '>', 70, 7)", None, "shift", "no shift of \\CAL (1, 2, 3"),
    ("SELECT _measure.threshold_set(%s, 'cpu', 'busy_max', '>', 'NaN')", None, "limit", "give a number"),
    ("SELECT _measure.threshold_set(%s, 'memory', 'busy_max', '>', 70)", None, "entity", "no entity type"),
    ("SELECT _measure.system_set(%s, %s)", {"time_zone": "Mars/Olympus"}, "time_zone", "no time zone name"),
    ("SELECT _measure.system_set(%s, %s)", {"number": 255}, "number", "0 to 254"),
    ("SELECT _measure.system_set(%s, %s)", {"name": "\\TOOLONGNAME"}, "name", "no system name"),
    ("SELECT _measure.system_set(%s, %s)", {"os_version": "B3"}, "os_version", "no NonStop OS version"),
    ("SELECT _measure.system_set(%s, %s)", {"cpu_types": [{"cpu": 16, "cpu_type": "VLX"}]}, "cpu_types[0].cpu",
     "no CPU number"),
    ("SELECT _measure.system_set(%s, %s)", {"cpu_types": [{"cpu": 1, "cpu_type": "PENTIUM"}]},
     "cpu_types[0].cpu_type", "no CPU type"),
    ("SELECT _measure.system_set(%s, %s)", {"colour": "blue"}, "colour", "no such field"),
])
def test_bad_input_names_the_field_and_applies_nothing(sys_id, conn, sql, args, field, message) -> None:
    def state():
        return (shifts(conn), conn.execute("SELECT * FROM _measure.system").fetchall(),
                conn.execute("SELECT * FROM _measure.calendar_shift").fetchall(),
                conn.execute("SELECT * FROM _measure.threshold ORDER BY threshold_id").fetchall(),
                conn.execute("SELECT * FROM _measure.system_cpu_type").fetchall())
    before = state()
    conn.execute("SAVEPOINT bad")
    params = (SYSTEM,) if args is None else (SYSTEM, json.dumps(args))
    with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        conn.execute(sql, params)
    conn.execute("ROLLBACK TO SAVEPOINT bad")
    assert err.value.diag.column_name == field
    assert message in err.value.diag.message_primary
    assert state() == before


def test_unknown_system_duplicates_and_collector_systems(sys_id, conn) -> None:
    conn.execute("SAVEPOINT a")
    with pytest.raises(psycopg.errors.NoDataFound) as err:
        conn.execute("SELECT _measure.holiday_set('\\NOSUCH', '2024-04-04', '')")
    assert err.value.diag.column_name == "system" and "unknown system" in err.value.diag.message_primary
    conn.execute("ROLLBACK TO SAVEPOINT a")
    with pytest.raises(psycopg.errors.UniqueViolation) as err:
        conn.execute("SELECT _measure.system_add('cal', 3, 'UTC')")
    assert err.value.diag.column_name == "name"
    conn.execute("ROLLBACK TO SAVEPOINT a")
    with pytest.raises(psycopg.errors.UniqueViolation) as err:
        conn.execute("SELECT _measure.system_add('\\OTHER', 17, 'UTC')")
    assert err.value.diag.column_name == "number" and "\\CAL" in err.value.diag.message_primary
    conn.execute("ROLLBACK TO SAVEPOINT a")
    # a system a collector registers keeps the name of its node file (the collector keeps a
    # configured time zone: tests/collector/test_service.py)
    conn.execute("INSERT INTO _measure.collector_state (collector_id, system_id, node, seed, step_us, epoch_at) "
                 "VALUES ('c1', %s, 'demo', 1, 60000000, now())", (sys_id,))
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as err:
        conn.execute("SELECT _measure.system_set(%s, '{\"name\": \"OTHER\"}')", (SYSTEM,))
    assert err.value.diag.column_name == "name" and "node file" in err.value.diag.message_primary
    conn.execute("ROLLBACK TO SAVEPOINT a")
    # ... but its number, OS version and CPU types may change
    out = call(conn, "SELECT _measure.system_set(%s, %s)", SYSTEM,
               json.dumps({"number": 18, "os_version": "c31", "cpu_types": [{"cpu": 1, "cpu_type": "txp"},
                                                                            {"cpu": None, "cpu_type": "VLX"}]}))
    assert out == {"system": SYSTEM, "recondensed": None}
    assert conn.execute("SELECT system_number, os_version, cpu_types FROM _measure.system_info(%s::smallint)",
                        (sys_id,)).fetchone() == (18, "C31", [{"cpu": None, "cpu_type": "VLX"},
                                                              {"cpu": 1, "cpu_type": "TXP"}])
    # a measured system is never removed
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as err:
        conn.execute("SELECT _measure.system_remove(%s)", (SYSTEM,))
    assert "has 1 measurement(s), 1 entity and 0 collector(s)" in err.value.diag.message_primary


def test_a_new_time_zone_moves_every_shift_day(sys_id, conn) -> None:
    out = call(conn, "SELECT _measure.system_set(%s, '{\"time_zone\": \"UTC\"}')", SYSTEM)
    # the data now covers UTC 2024-04-03 15:00 .. 04-08 15:00: six shift days in UTC, all new
    assert out["recondensed"]["days"] == 6 and out["recondensed"]["hours"] == HOURS
    rows = shifts(conn)
    assert [r[:3] for r in rows[:2]] == [("2024-04-03", 2, 1), ("2024-04-03", 3, 8)]   # 15:00 UTC = Tokyo midnight
    assert sum(r[2] for r in rows) == HOURS
    # busy = the Tokyo hour
    assert rows[2] == ("2024-04-04", 1, 8, 8, D("12.5"), 16, 9)     # Tokyo 09-17
    assert rows[3] == ("2024-04-04", 2, 8, 8, D("17.5"), 23, 0)     # Tokyo 17-01
    assert rows[4] == ("2024-04-04", 3, 8, 8, D("4.5"), 8, 1)       # Tokyo 01-09
    assert conn.execute("SELECT min(day)::text, max(day)::text, count(*) FROM _measure.cpu_trend_day "
                        "WHERE system_id = %s", (sys_id,)).fetchone() == ("2024-04-03", "2024-04-08", 6)


def test_every_write_is_one_transaction_the_api_role_calls_through_its_functions(sys_id, conn) -> None:
    conn.execute("SAVEPOINT r")
    conn.execute("SET LOCAL ROLE measure_api")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT _measure.holiday_set(%s, '2024-04-05', '')", (SYSTEM,))
    conn.execute("ROLLBACK TO SAVEPOINT r")
    conn.execute("SET LOCAL ROLE measure_api")
    out = call(conn, "SELECT measure.config_holiday_set(%s, '2024-04-05', 'via the API role')", SYSTEM)
    assert out["recondensed"]["days"] == 1
    assert conn.execute("SELECT day::text, name FROM measure.holiday").fetchall() == [("2024-04-05", "via the API role")]
    conn.execute("RESET ROLE")


def test_days_before_the_hour_horizon_keep_their_rows(sys_id, conn) -> None:
    # retention removed the hour tiers before Saturday: Thursday and Friday cannot be recondensed
    conn.execute("INSERT INTO _measure.purged (class, purged_before) VALUES ('hour', %s) "
                 "ON CONFLICT (class) DO UPDATE SET purged_before = excluded.purged_before",
                 (datetime(2024, 4, 6, tzinfo=TZ).astimezone(UTC),))
    out = call(conn, "SELECT _measure.calendar_set(%s, '2024-04-04', %s)", SYSTEM, json.dumps(WEEKDAYS))
    assert out["recondensed"]["first_day"] == "2024-04-06" and out["recondensed"]["days"] == 3
    assert shifts(conn)[:6] == default_days("2024-04-04", "2024-04-05")
