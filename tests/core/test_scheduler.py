"""Scheduled reports (core/scheduler.py): slots in the system's time zone, relative dates,
one run per slot with two schedulers, failures recorded and retried at the next slot,
interrupted runs, restarts, and the default definitions of the 1986 routine."""

from __future__ import annotations

import importlib.util
import json
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
import pytest

from core import reports, scheduler
from core import schema as schema_runner
from core.scheduler import (
    ScheduleError,
    due_slots,
    next_slot,
    resolve_parameters,
    resolve_period,
    run_due,
)
from tests.engine import MODE

_spec = importlib.util.spec_from_file_location(
    "test_tiers_data", Path(__file__).parents[1] / "schema" / "test_tiers_data.py")
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)

BERLIN = ZoneInfo("Europe/Berlin")
LA = ZoneInfo("America/Los_Angeles")
SYS = "\\SCHED"  # Europe/Berlin, no data


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN)


# ---------------------------------------------------------------- no database


@pytest.mark.parametrize(("expr", "today", "expected"), [
    ("yesterday", date(2024, 3, 1), (date(2024, 2, 29), date(2024, 2, 29))),     # leap day
    ("yesterday", date(2024, 1, 1), (date(2023, 12, 31), date(2023, 12, 31))),   # year end
    ("today", date(2024, 1, 1), (date(2024, 1, 1), date(2024, 1, 1))),
    ("3 days ago", date(2024, 3, 2), (date(2024, 2, 28), date(2024, 2, 28))),
    ("last week", date(2024, 1, 1), (date(2023, 12, 25), date(2023, 12, 31))),   # a Monday
    ("last week", date(2024, 1, 7), (date(2023, 12, 25), date(2023, 12, 31))),   # a Sunday
    ("this week", date(2024, 2, 29), (date(2024, 2, 26), date(2024, 3, 3))),
    ("last month", date(2024, 3, 31), (date(2024, 2, 1), date(2024, 2, 29))),
    ("last month", date(2024, 1, 1), (date(2023, 12, 1), date(2023, 12, 31))),
    ("this month", date(2024, 12, 15), (date(2024, 12, 1), date(2024, 12, 31))),
    ("last 3 months", date(2024, 2, 15), (date(2023, 11, 1), date(2024, 1, 31))),
    ("last 7 days", date(2024, 3, 3), (date(2024, 2, 25), date(2024, 3, 2))),
    ("last 2 weeks", date(2024, 3, 6), (date(2024, 2, 19), date(2024, 3, 3))),
    ("Last  Year", date(2024, 6, 1), (date(2023, 1, 1), date(2023, 12, 31))),
    ("2024-02-29", date(2030, 1, 1), (date(2024, 2, 29), date(2024, 2, 29))),
])
def test_relative_dates(expr: str, today: date, expected: tuple[date, date]) -> None:
    assert resolve_period(expr, today) == expected


@pytest.mark.parametrize("bad", ["the other day", "last 0 days", "2024-02-30", 17])
def test_bad_relative_dates_name_the_forms(bad) -> None:
    with pytest.raises(ScheduleError, match="write YYYY-MM-DD, today, yesterday|N must be at least 1"):
        resolve_period(bad, date(2024, 1, 1))


def test_parameters_resolve_in_the_systems_zone_not_utc() -> None:
    # 00:30 CEST on 1 April is still 31 March in UTC: yesterday is 31 March, last month March
    slot = berlin(2024, 4, 1, 0, 30).astimezone(UTC)
    assert slot.date() == date(2024, 3, 31)
    p = resolve_parameters("threshold", {"day": "yesterday", "shift": 2}, system=SYS, slot_at=slot,
                           time_zone="Europe/Berlin")
    assert p == {"system": SYS, "day": date(2024, 3, 31), "shift": 2}
    p = resolve_parameters("cpu-trend", {"period": "last month"}, system=SYS, slot_at=slot,
                           time_zone="Europe/Berlin")
    assert (p["date_from"], p["date_to"]) == (date(2024, 3, 1), date(2024, 3, 31))
    # the same instant in Los Angeles is still 31 March: yesterday is the 30th
    p = resolve_parameters("threshold", {"day": "yesterday"}, system=SYS, slot_at=slot,
                           time_zone="America/Los_Angeles")
    assert (p["day"], p["shift"]) == (date(2024, 3, 30), None)


def test_time_windows_are_local_midnights_and_a_dst_day_has_23_hours() -> None:
    p = resolve_parameters("process-summary", {"period": "yesterday"}, system=SYS,
                           slot_at=berlin(2024, 4, 1, 6, 0), time_zone="Europe/Berlin")
    assert p["from_at"] == berlin(2024, 3, 31, 0, 0) and p["to_at"] == berlin(2024, 4, 1, 0, 0)
    assert p["to_at"].astimezone(UTC) - p["from_at"].astimezone(UTC) == timedelta(hours=23)
    p = resolve_parameters("process-summary", {"from_at": "2024-10-27", "to_at": "2024-10-27"}, system=SYS,
                           slot_at=berlin(2024, 11, 1, 6, 0), time_zone="Europe/Berlin")
    assert p["to_at"].astimezone(UTC) - p["from_at"].astimezone(UTC) == timedelta(hours=25)


def test_parameter_mistakes_are_named() -> None:
    slot = berlin(2024, 4, 1, 6, 0)
    with pytest.raises(ScheduleError, match="report threshold takes one day; period 'last week'"):
        resolve_parameters("threshold", {"period": "last week"}, system=SYS, slot_at=slot, time_zone="UTC")
    with pytest.raises(reports.ReportError, match="unknown parameter.* bogus"):
        resolve_parameters("threshold", {"day": "today", "bogus": 1}, system=SYS, slot_at=slot, time_zone="UTC")
    with pytest.raises(reports.ReportError, match="unknown report 'nope'"):
        resolve_parameters("nope", {}, system=SYS, slot_at=slot, time_zone="UTC")


def test_daily_slots_follow_local_time_across_dst() -> None:
    since = berlin(2024, 3, 29, 6, 0)
    slots = due_slots("0 6 * * *", BERLIN, berlin(2024, 3, 31, 12, 0), since)
    assert slots == [datetime(2024, 3, 30, 5, 0, tzinfo=UTC), datetime(2024, 3, 31, 4, 0, tzinfo=UTC)]
    # a never-run definition starts with its latest slot; a slot exactly at now is due
    assert due_slots("0 6 * * *", BERLIN, berlin(2024, 3, 31, 6, 0), None) == [berlin(2024, 3, 31, 6, 0)]
    assert due_slots("0 6 * * *", BERLIN, berlin(2024, 3, 31, 5, 59), None) == [berlin(2024, 3, 30, 6, 0)]


def test_slots_in_the_dst_gap_and_the_repeated_hour_run_once() -> None:
    # 02:30 does not exist on 31 March (02:00 CET -> 03:00 CEST): it runs at 03:30 CEST
    assert due_slots("30 2 * * *", BERLIN, berlin(2024, 3, 31, 12, 0), None) == [
        datetime(2024, 3, 31, 1, 30, tzinfo=UTC)]
    # 02:30 happens twice on 27 October: once, at the first (CEST, 00:30 UTC)
    slots = due_slots("30 2 * * *", BERLIN, berlin(2024, 10, 28, 12, 0), berlin(2024, 10, 25, 12, 0))
    assert slots == [datetime(2024, 10, 26, 0, 30, tzinfo=UTC), datetime(2024, 10, 27, 0, 30, tzinfo=UTC),
                     datetime(2024, 10, 28, 1, 30, tzinfo=UTC)]
    assert next_slot("30 2 * * *", BERLIN, datetime(2024, 10, 27, 0, 30, tzinfo=UTC)) == \
        datetime(2024, 10, 28, 1, 30, tzinfo=UTC)


def test_catch_up_is_capped() -> None:
    slots = due_slots("0 * * * *", UTC, datetime(2024, 5, 2, 10, 30, tzinfo=UTC),
                      datetime(2024, 5, 1, 0, 0, tzinfo=UTC), catch_up=3)
    assert slots == [datetime(2024, 5, 2, h, 0, tzinfo=UTC) for h in (8, 9, 10)]


@pytest.mark.parametrize("bad", ["0 6 * *", "0 6 * * * *", "61 6 * * *", "@daily"])
def test_bad_schedules_are_refused(bad: str) -> None:
    with pytest.raises(ScheduleError, match="not a 5-field cron expression"):
        due_slots(bad, UTC, datetime(2024, 1, 1, tzinfo=UTC), None)


# ---------------------------------------------------------------- with the database


@pytest.fixture(scope="module")
def sched_url(fresh_database) -> str:
    url = fresh_database("_sched")
    schema_runner.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                  "VALUES (%s, 9, 'Europe/Berlin')", (SYS,))
        data.load(c)  # \TEST in America/Los_Angeles with a hand-built data base
    return url


@pytest.fixture(scope="module")
def defaults(sched_url: str) -> list[tuple]:
    with psycopg.connect(sched_url) as c:
        return c.execute("SELECT name, report, parameters, schedule, outputs, description "
                         "FROM _measure.report_definition ORDER BY definition_id").fetchall()


@pytest.fixture
def db(sched_url: str, defaults) -> psycopg.Connection:
    """No definitions and no runs; the test adds its own (committed: the scheduler connects)."""
    with psycopg.connect(sched_url, autocommit=True) as c:
        c.execute("DELETE FROM _measure.report_definition")
        yield c


def define(db: psycopg.Connection, name: str, report: str, params: dict, schedule: str,
           system: str | None = SYS, outputs: tuple[str, ...] = ("text",)) -> None:
    db.execute("INSERT INTO _measure.report_definition (name, report, system_id, parameters, schedule, outputs) "
               "VALUES (%s, %s, (SELECT system_id FROM _measure.system WHERE system_name = %s), %s, %s, %s)",
               (name, report, system, psycopg.types.json.Jsonb(params), schedule, list(outputs)))


def runs(db: psycopg.Connection) -> list[tuple]:
    return db.execute("SELECT definition, system_name, slot_at, status, attempt, rows, error "
                      "FROM measure.report_run ORDER BY slot_at, definition, system_name").fetchall()


def test_due_report_runs_once_and_stores_its_outputs(db, sched_url) -> None:
    define(db, "th", "threshold", {"day": "yesterday", "shift": 3}, "0 6 * * *", system=data.SYSTEM,
           outputs=("text", "csv"))
    now = datetime(2024, 3, 10, 6, 0, 30, tzinfo=LA)      # the day DST starts in Los Angeles
    results = run_due(sched_url, now, instance="a")
    slot = datetime(2024, 3, 10, 6, 0, tzinfo=LA)
    assert [(r.definition, r.system, r.slot_at, r.status, r.attempt, r.rows) for r in results] == [
        ("th", data.SYSTEM, slot, "succeeded", 1, 2)]
    row = db.execute("SELECT parameters, output_text, output_csv, output_json, instance, finished_at "
                     "FROM measure.report_run WHERE run_id = %s", (results[0].run_id,)).fetchone()
    params, text, csv_, json_, instance, finished = row
    assert params == {"system": data.SYSTEM, "day": "2024-03-09", "shift": 3} and instance == "a"
    assert text.splitlines()[0].strip() == "THRESHOLD REPORT" and "   DATE:       2024-03-09" in text
    assert csv_.splitlines()[0].startswith("cpu,time_of_day,") and len(csv_.splitlines()) == 3
    assert [(r["cpu"], r["time_of_day"]) for r in json.loads(json_)] == [(0, "23:00"), (0, "03:00")]
    assert finished is not None
    assert run_due(sched_url, now + timedelta(minutes=1), instance="a") == []
    assert len(runs(db)) == 1


def test_two_schedulers_at_once_run_each_slot_once(db, sched_url) -> None:
    define(db, "every-hour", "condensation-check", {"day": "yesterday"}, "0 * * * *")
    define(db, "all-systems", "threshold", {"day": "yesterday"}, "0 6 * * *", system=None)
    now = berlin(2024, 4, 2, 6, 10)
    start = threading.Barrier(2)
    out: dict[str, list] = {}

    def scheduler_instance(name: str) -> None:
        start.wait()
        out[name] = run_due(sched_url, now, instance=name)

    threads = [threading.Thread(target=scheduler_instance, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ran = sorted((r.definition, r.system, r.slot_at) for r in out["a"] + out["b"])
    assert ran == sorted([("every-hour", SYS, berlin(2024, 4, 2, 6, 0)),
                          ("all-systems", SYS, berlin(2024, 4, 2, 6, 0)),
                          ("all-systems", data.SYSTEM, datetime(2024, 4, 1, 6, 0, tzinfo=LA))])
    # sequential instances at the same instant: nothing left to run
    assert run_due(sched_url, now, instance="c") == [] and run_due(sched_url, now, instance="a") == []
    assert [r[3] for r in runs(db)] == ["succeeded"] * 3


def test_a_failing_report_is_recorded_and_retried_at_the_next_slot(db, sched_url) -> None:
    define(db, "broken", "threshold", {"day": "yesterday", "bogus": 1}, "0 6 * * *")
    first = run_due(sched_url, berlin(2024, 4, 2, 6, 5), instance="a")
    assert [(r.status, r.attempt) for r in first] == [("failed", 1)]
    assert "unknown parameter(s) bogus" in first[0].error
    row = db.execute("SELECT status, error, retry_after, output_text FROM measure.report_run").fetchone()
    assert row[0] == "failed" and "bogus" in row[1] and row[2] == berlin(2024, 4, 3, 6, 0) and row[3] is None
    # not before the next slot
    assert run_due(sched_url, berlin(2024, 4, 2, 23, 0), instance="a") == []
    # next slot, still broken: the old slot's second try fails, the new slot's first try fails
    second = run_due(sched_url, berlin(2024, 4, 3, 6, 1), instance="b")
    assert [(r.slot_at, r.status, r.attempt) for r in second] == [
        (berlin(2024, 4, 2, 6, 0), "failed", 2), (berlin(2024, 4, 3, 6, 0), "failed", 1)]
    # the definition is fixed: the next slot runs and both earlier slots succeed on retry
    db.execute("UPDATE _measure.report_definition SET parameters = '{\"day\": \"yesterday\"}' WHERE name = 'broken'")
    third = run_due(sched_url, berlin(2024, 4, 4, 6, 1), instance="a")
    assert [(r.slot_at, r.status, r.attempt) for r in third] == [
        (berlin(2024, 4, 2, 6, 0), "succeeded", 3), (berlin(2024, 4, 3, 6, 0), "succeeded", 2),
        (berlin(2024, 4, 4, 6, 0), "succeeded", 1)]
    got = db.execute("SELECT parameters->>'day', error, retry_after FROM measure.report_run ORDER BY slot_at").fetchall()
    assert got == [("2024-04-01", None, None), ("2024-04-02", None, None), ("2024-04-03", None, None)]


def test_a_slot_that_keeps_failing_stays_failed_after_max_attempts(db, sched_url) -> None:
    define(db, "nope", "no-such-report", {}, "0 6 * * *")
    for day in (2, 3, 4, 5):
        run_due(sched_url, berlin(2024, 4, day, 6, 1), instance="a", max_attempts=2)
    got = db.execute("SELECT local_slot::date, status, attempt, retry_after IS NULL, error FROM measure.report_run "
                     "ORDER BY slot_at").fetchall()
    assert [g[:4] for g in got] == [(date(2024, 4, 2), "failed", 2, True), (date(2024, 4, 3), "failed", 2, True),
                                    (date(2024, 4, 4), "failed", 2, True), (date(2024, 4, 5), "failed", 1, False)]
    assert all("unknown report 'no-such-report'" in g[4] for g in got)


def test_a_crash_mid_run_is_marked_interrupted_and_retried(db, sched_url, monkeypatch) -> None:
    define(db, "th", "threshold", {"day": "yesterday"}, "0 6 * * *")

    def crash(*_a, **_k):
        raise KeyboardInterrupt  # the scheduler process dies while the report runs

    monkeypatch.setattr(reports, "run_report", crash)
    with pytest.raises(KeyboardInterrupt):
        run_due(sched_url, berlin(2024, 4, 2, 6, 1), instance="dead")
    monkeypatch.undo()
    assert [r[3] for r in runs(db)] == ["running"]
    # a restarted scheduler soon after: the claim is recent, it is left alone and not run again
    assert run_due(sched_url, berlin(2024, 4, 2, 6, 2), instance="new") == []
    assert [r[3] for r in runs(db)] == ["running"]
    # after the timeout it is marked interrupted, and retried at the next slot
    assert run_due(sched_url, berlin(2024, 4, 2, 6, 3), instance="new", stale_after=timedelta(0)) == []
    status, error, retry_after = db.execute("SELECT status, error, retry_after FROM measure.report_run").fetchone()
    assert status == "failed" and error.startswith("interrupted: claimed by dead at ")
    assert retry_after == berlin(2024, 4, 3, 6, 0)
    done = run_due(sched_url, berlin(2024, 4, 3, 6, 0), instance="new")
    assert [(r.slot_at, r.status, r.attempt) for r in done] == [
        (berlin(2024, 4, 2, 6, 0), "succeeded", 2), (berlin(2024, 4, 3, 6, 0), "succeeded", 1)]


def test_a_restarted_scheduler_does_not_run_a_slot_twice_and_catches_up_at_most_three(db, sched_url) -> None:
    define(db, "th", "threshold", {"day": "yesterday"}, "0 6 * * *")
    assert len(run_due(sched_url, berlin(2024, 4, 2, 6, 0), instance="before")) == 1
    assert run_due(sched_url, berlin(2024, 4, 2, 6, 0), instance="after-restart") == []
    # down for ten days: the last three slots are caught up, oldest first
    late = run_due(sched_url, berlin(2024, 4, 12, 7, 0), instance="after-restart")
    assert [r.slot_at for r in late] == [berlin(2024, 4, d, 6, 0) for d in (10, 11, 12)]
    assert [r[2] for r in runs(db)] == [berlin(2024, 4, d, 6, 0) for d in (2, 10, 11, 12)]


def test_a_bad_schedule_is_reported_not_fatal(db, sched_url) -> None:
    define(db, "bad-cron", "threshold", {"day": "yesterday"}, "61 6 * * *")
    define(db, "good", "threshold", {"day": "yesterday"}, "0 6 * * *")
    results = run_due(sched_url, berlin(2024, 4, 2, 6, 1), instance="a")
    assert [(r.definition, r.status) for r in results] == [("bad-cron", "failed"), ("good", "succeeded")]
    assert "not a 5-field cron expression" in results[0].error and results[0].run_id is None


def test_the_1986_routine_runs_for_every_system(db, sched_url, defaults) -> None:
    for name, report, params, cron, outputs, description in defaults:
        db.execute("INSERT INTO _measure.report_definition (name, report, parameters, schedule, outputs, description) "
                   "VALUES (%s, %s, %s, %s, %s, %s)",
                   (name, report, psycopg.types.json.Jsonb(params), cron, outputs, description))
    assert {d[0] for d in defaults} == {"daily-condensation-check", "daily-threshold", "weekly-shift-summary",
                                       "monthly-cpu-trend", "monthly-capacity-forecast"}
    # Monday 1 April 2024, 07:00 in Berlin (still Sunday 31 March, 22:00 in Los Angeles): every
    # definition runs its latest slot for each system, its dates resolved in that system's zone
    results = run_due(sched_url, berlin(2024, 4, 1, 7, 0), instance="a")
    assert all(r.status == "succeeded" for r in results), [r.error for r in results if r.error]
    got = {(name, system): params for name, system, params in db.execute(
        "SELECT definition, system_name, parameters FROM measure.report_run")}
    assert got == {
        ("daily-condensation-check", SYS): {"system": SYS, "day": "2024-03-31"},
        ("daily-threshold", SYS): {"system": SYS, "day": "2024-03-31", "shift": None},
        ("weekly-shift-summary", SYS): {"system": SYS, "date_from": "2024-03-25", "date_to": "2024-03-31"},
        ("monthly-cpu-trend", SYS): {"system": SYS, "date_from": "2024-03-01", "date_to": "2024-03-31"},
        ("monthly-capacity-forecast", SYS): {"system": SYS, "date_from": "2024-01-01", "date_to": "2024-03-31",
                                             "capacity": 70},
        ("daily-condensation-check", data.SYSTEM): {"system": data.SYSTEM, "day": "2024-03-30"},
        ("daily-threshold", data.SYSTEM): {"system": data.SYSTEM, "day": "2024-03-30", "shift": None},
        ("weekly-shift-summary", data.SYSTEM): {"system": data.SYSTEM, "date_from": "2024-03-18",
                                                "date_to": "2024-03-24"},
        ("monthly-cpu-trend", data.SYSTEM): {"system": data.SYSTEM, "date_from": "2024-02-01",
                                             "date_to": "2024-02-29"},
        ("monthly-capacity-forecast", data.SYSTEM): {"system": data.SYSTEM, "date_from": "2023-12-01",
                                                     "date_to": "2024-02-29", "capacity": 70}}
    # the weekly shift summary of \TEST for the week of 18 March: the shift-3 day of 19 March
    text = db.execute("SELECT output_text FROM measure.report_run WHERE definition = 'weekly-shift-summary' "
                      "AND system_name = %s", (data.SYSTEM,)).fetchone()[0]
    assert "SHIFT SUMMARY REPORT" in text and "2024-03-19" in text


def test_condensation_check_lists_the_hours_that_are_not_complete(db, sched_url) -> None:
    define(db, "cc", "condensation-check", {"day": "yesterday"}, "0 6 * * *", system=data.SYSTEM,
           outputs=("text",))
    # an hour of CPU 0 that arrived but is not condensed yet: 13:00 PDT on 10 March
    late = (datetime(2024, 3, 10, 20, 0, tzinfo=UTC), datetime(2024, 3, 10, 21, 0, tzinfo=UTC))
    db.execute("INSERT INTO _measure.interval_record SELECT measurement_id, entity_id, record_at, %s, %s, delta_us, "
               "closing_kind, system_id, type_code, cpu, error, counters FROM _measure.interval_record "
               "WHERE type_code = 1 AND from_at = '2024-03-20 07:00Z'", late)
    db.execute("SELECT _measure.note_intervals(system_id, %s, %s) FROM _measure.system WHERE system_name = %s",
               (late[0], late[0], data.SYSTEM))  # (first, last FROM-TIMESTAMP)
    try:
        # 10 March 2024 in Los Angeles has 23 hours (DST). 00:00 PDT is complete (measurement A covers
        # CPU 0's whole hour), 03:00 only half measured, 13:00 not condensed, the rest has no data
        (r,) = run_due(sched_url, datetime(2024, 3, 11, 6, 0, tzinfo=LA), instance="a")
    finally:
        db.execute("DELETE FROM _measure.interval_record WHERE from_at = %s", (late[0],))
        db.execute("DELETE FROM _measure.tier_dirty WHERE hour_at = %s", (late[0],))
    rows = json.loads(db.execute("SELECT output_json FROM measure.report_run WHERE run_id = %s",
                                 (r.run_id,)).fetchone()[0])
    special = {"03:00": "partial coverage", "13:00": "not condensed, pending"}
    hours = ["01:00"] + [f"{h:02d}:00" for h in range(3, 24)]
    assert [(x["time_of_day"], x["problems"]) for x in rows] == [(h, special.get(h, "no data")) for h in hours]
    three = rows[1]
    assert (three["measured"], three["condensed"], three["coverage_min"], three["shift_day"], three["shift_no"]) == (
        1, 1, 0.5, "2024-03-09", 3)
    text = db.execute("SELECT output_text FROM measure.report_run WHERE run_id = %s", (r.run_id,)).fetchone()[0]
    assert text.splitlines()[0].strip() == "CONDENSATION CHECK" and "DT07013" in text


def test_run_due_refuses_a_naive_now(sched_url) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        scheduler.run_due(sched_url, datetime(2024, 1, 1))


def test_cli_run_due_runs_lists_and_shows(db, sched_url, monkeypatch) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    monkeypatch.setenv("DATABASE_URL", sched_url)
    define(db, "th", "threshold", {"day": "yesterday", "shift": 3}, "0 6 * * *", system=data.SYSTEM)
    define(db, "broken", "no-such-report", {}, "0 6 * * *")
    cli = CliRunner()
    r = cli.invoke(app, ["report", "schedule", "run-due", "--now", "2024-03-10T06:00:30-07:00"])
    assert r.exit_code == 0, r.output
    run_id = db.execute("SELECT run_id FROM measure.report_run WHERE definition = 'th'").fetchone()[0]
    assert f"run {run_id}: th for {data.SYSTEM}, slot 2024-03-10T13:00:00+00:00, attempt 1: 2 rows" in r.output
    assert "broken for \\SCHED" in r.output and "FAILED: unknown report 'no-such-report'" in r.output
    r = cli.invoke(app, ["report", "schedule", "show", str(run_id)])
    assert r.exit_code == 0 and r.output.splitlines()[0].strip() == "THRESHOLD REPORT"
    r = cli.invoke(app, ["report", "schedule", "show", str(run_id), "--format", "csv"])
    assert r.exit_code == 0 and r.output.startswith("cpu,time_of_day,")   # not stored: from the rows
    r = cli.invoke(app, ["report", "schedule", "runs", "--status", "failed"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "broken" in r.output and " th " not in r.output
    r = cli.invoke(app, ["report", "schedule", "list"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "threshold" in r.output and "no-such-report" in r.output
    r = cli.invoke(app, ["report", "schedule", "show", "999999"])
    assert r.exit_code == 2 and "no report run 999999" in r.output
    r = cli.invoke(app, ["report", "schedule", "run-due", "--now", "2024-03-10T06:00"])
    assert r.exit_code == 2 and "an ISO instant with an offset" in r.output
    # the report command itself still runs a report by name, the schedule's own ones included
    r = cli.invoke(app, ["report", "condensation-check", "--system", data.SYSTEM, "--date", "2024-03-10",
                         "--format", "csv"])
    assert r.exit_code == 0 and r.output.startswith("hour_at,time_of_day,")
