"""`measuredb system | calendar | threshold`: configuration through validated commands, each
one transaction; changes of past shifts say what they recondensed; bad input is one line
naming the option, exit status 2, nothing applied."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from cli.calendar import parse_days, parse_shift
from cli.main import app
from cli.system import parse_cpu_types
from core import schema
from tests.engine import MODE

_spec = importlib.util.spec_from_file_location("test_calendar", Path(__file__).parents[1] / "schema" / "test_calendar.py")
calendar_data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(calendar_data)


@pytest.mark.parametrize(("text", "days"), [("mon-fri", [1, 2, 3, 4, 5]), ("sat,sun", [6, 7]), ("Fri-Mon", [1, 5, 6, 7]),
                                            ("daily", [1, 2, 3, 4, 5, 6, 7]), ("weekend", [6, 7]),
                                            ("monday,wednesday", [1, 3]), ("day", None), ("mo", None)])
def test_day_lists(text: str, days: list[int] | None) -> None:
    assert parse_days(text) == days


def test_shift_specs() -> None:
    assert parse_shift("3 23:00-07:00 mon-fri night shift") == {
        "shift_no": 3, "begin": "23:00", "end": "07:00", "weekdays": [1, 2, 3, 4, 5], "name": "night shift"}
    assert parse_shift("1 0-8") == {"shift_no": 1, "begin": "0", "end": "8", "name": ""}
    assert parse_shift("2 8-16 day") == {"shift_no": 2, "begin": "8", "end": "16", "name": "day"}
    for bad in ("day 07-15", "1 07:00", "1"):
        with pytest.raises(ValueError, match="is not NUMBER BEGIN-END"):
            parse_shift(bad)


def test_cpu_type_specs() -> None:
    assert parse_cpu_types("VLX") == [{"cpu": None, "cpu_type": "VLX"}]
    assert parse_cpu_types("0-1=TXP,3=vlx") == [{"cpu": 0, "cpu_type": "TXP"}, {"cpu": 1, "cpu_type": "TXP"},
                                                 {"cpu": 3, "cpu_type": "vlx"}]
    assert parse_cpu_types("*=VLX,2=TXP") == [{"cpu": None, "cpu_type": "VLX"}, {"cpu": 2, "cpu_type": "TXP"}]
    assert parse_cpu_types("none") == []
    with pytest.raises(ValueError, match="no CPU number"):
        parse_cpu_types("x=VLX")


@pytest.fixture
def env(fresh_database, monkeypatch, tmp_path) -> str:
    url = fresh_database("_config_cli")
    schema.apply(url, mode=MODE)
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    return url


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def refused(result, line: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.output.strip() == line


def test_systems(env: str) -> None:
    added = invoke("system", "add", "demo2", "--number", "9", "--time-zone", "Asia/Tokyo", "--cpu-types", "0-1=TXP,2=vlx")
    assert added.exit_code == 0, added.output
    assert added.output.strip() == "\\DEMO2 added: number 9, Asia/Tokyo, B30, CPU types 0=TXP, 1=TXP, 2=VLX"
    listed = invoke("system", "list")
    assert listed.exit_code == 0
    line = next(x for x in listed.output.splitlines() if "DEMO2" in x)
    assert [c.strip() for c in line.strip("│ ").split("│")][:7] == [
        "\\DEMO2", "9", "Asia/Tokyo", "B30", "0=TXP, 1=TXP, 2=VLX", "-", "0"]
    refused(invoke("system", "add", "demo2", "--number", "10", "--time-zone", "UTC"),
            "measuredb: SYSTEM: a system named \\DEMO2 exists already")  # add has no --name
    refused(invoke("system", "set", "demo2", "--time-zone", "Mars/Olympus", "--number", "11"),
            "measuredb: --time-zone: Mars/Olympus is no time zone name (Area/City, e.g. America/Los_Angeles, "
            "Europe/Berlin, UTC)")
    refused(invoke("system", "set", "demo2", "--cpu-types", "0=PENTIUM"),
            "measuredb: --cpu-types #1 (cpu_type): PENTIUM is no CPU type (one of NONSTOP-I, NONSTOP-II, TXP, VLX, "
            "EXT10, EXT25, CLX, CYCLONE, NONSTOP-X)")
    with psycopg.connect(env) as c:   # nothing of the refused changes was applied
        assert c.execute("SELECT system_number, time_zone FROM _measure.system WHERE system_name = '\\DEMO2'"
                         ).fetchone() == (9, "Asia/Tokyo")
        assert c.execute("SELECT count(*) FROM _measure.system_cpu_type").fetchone() == (3,)
    changed = invoke("system", "set", "\\demo2", "--number", "11", "--os-version", "c30")
    assert changed.exit_code == 0 and changed.output.strip() == "\\DEMO2 changed: number, os_version"
    shown = invoke("system", "show", "DEMO2")
    assert shown.exit_code == 0 and "│ number" in shown.output and " 11 " in shown.output and "C30" in shown.output
    refused(invoke("system", "show", "nosuch"), "measuredb: SYSTEM: unknown system nosuch (systems: \\DEMO2)")
    removed = invoke("system", "remove", "demo2")
    assert removed.exit_code == 0 and removed.output.strip() == "\\DEMO2 removed"
    with psycopg.connect(env) as c:
        assert c.execute("SELECT count(*) FROM _measure.system_cpu_type").fetchone() == (0,)


def test_calendar_holidays_and_thresholds(env: str) -> None:
    with psycopg.connect(env) as c:
        calendar_data.load(c)          # \CAL: 120 measured hours, Thursday 2024-04-04 to Monday
    ok = invoke("calendar", "set", "cal", "--from", "2024-04-06", "--shift", "1 07:00-15:00 mon-fri day",
                "--shift", "2 15-23 mon-fri evening", "--shift", "3 23-07 mon-fri night",
                "--shift", "4 10-18 sat,sun weekend", "--holiday-shift", "9")
    assert ok.exit_code == 0, ok.output
    assert ok.output.splitlines() == ["calendar of \\CAL from 2024-04-06 set",
                                      "recondensed 3 shift days (72 hours with data): 2024-04-06 to 2024-04-08"]
    bad = invoke("calendar", "set", "cal", "--from", "2024-04-05", "--shift", "1 07:30-15:00")
    refused(bad, "measuredb: --shift #1 (begin): 07:30 is not a whole hour (shifts begin and end on the hour)")
    refused(invoke("calendar", "set", "cal", "--from", "2024-04-05", "--shift", "1 08-16", "--shift", "2 15-23"),
            "measuredb: --shift #2: shift 2 on Monday (15:00-23:00) overlaps shift 1 on Monday (08:00-16:00)")
    refused(invoke("calendar", "set", "cal", "--from", "5 April", "--shift", "1 08-16"),
            "measuredb: --from: '5 April' is no date (YYYY-MM-DD)")
    shown = invoke("calendar", "show", "cal")
    assert shown.exit_code == 0
    lines = [x.strip() for x in shown.output.splitlines()]
    assert "default shifts, every day to 2024-04-05" in lines
    assert "calendar from 2024-04-06; holidays: shift 9" in lines      # the refused versions are not there
    assert ["3", "night", "mon-fri", "23:00", "07:00 (next day)"] in [
        [c.strip() for c in x.split("│")[1:6]] for x in shown.output.splitlines() if x.count("│") >= 5]
    holiday = invoke("calendar", "holiday", "add", "cal", "2024-04-08", "--name", "Spring")
    assert holiday.exit_code == 0
    assert holiday.output.splitlines() == ["2024-04-08 is a holiday of \\CAL",
                                           "recondensed 1 shift day (17 hours with data): 2024-04-08"]
    with psycopg.connect(env) as c:
        assert c.execute("SELECT shift_no, hours, busy_avg FROM measure.cpu_shift WHERE shift_day = '2024-04-08'"
                         ).fetchall() == [(9, 17, 15)]
    refused(invoke("calendar", "holiday", "remove", "cal", "2024-04-09"),
            "measuredb: DATE: 2024-04-09 is no holiday of \\CAL")
    assert invoke("calendar", "holiday", "remove", "cal", "2024-04-08").exit_code == 0
    removed = invoke("calendar", "remove", "cal", "--from", "2024-04-06")
    assert removed.output.splitlines() == ["calendar of \\CAL from 2024-04-06 removed",
                                           "recondensed 3 shift days (72 hours with data): 2024-04-06 to 2024-04-08"]

    th = invoke("threshold", "set", "cpu", "busy_max", ">", "20", "--system", "cal")
    assert th.exit_code == 0, th.output
    assert th.output.splitlines() == ["threshold cpu busy_max > 20 of \\CAL (every shift) set",
                                      "stored violations re-evaluated on 120 hours of 1 system"]
    refused(invoke("threshold", "set", "cpu", "busy_max", ">", "20", "--system", "cal", "--shift", "7"),
            "measuredb: --shift: 7 is no shift of \\CAL (1, 2, 3; none: every shift)")
    refused(invoke("threshold", "set", "cpu", "busy_max", ">", "lots", "--system", "cal"),
            "measuredb: LIMIT: 'lots' is no number")
    refused(invoke("threshold", "set", "cpu", "busy_max", "=", "20"), "measuredb: OPERATOR: = is none of >, >=, <, <=")
    assert invoke("threshold", "set", "cpu", "busy_max", ">", "22", "--system", "cal", "--shift", "3").exit_code == 0
    listed = invoke("threshold", "list", "--system", "cal")
    rows = [r for r in ([c.strip() for c in x.strip("│ ").split("│")][:8] for x in listed.output.splitlines())
            if r[1:3] == ["cpu", "busy_max"]]
    assert rows == [["\\CAL", "cpu", "busy_max", ">", "20", "every", "yes", "system"],
                    ["default", "cpu", "busy_max", ">", "70", "every", "no", "default (replaced)"],
                    ["\\CAL", "cpu", "busy_max", ">", "22", "3", "yes", "system"]]
    with psycopg.connect(env) as c:
        assert c.execute("SELECT time_of_day, broken FROM measure.report_threshold('\\CAL', '2024-04-05')"
                         ).fetchall() == [("23:00", ["busy_max > 22"])]
    gone = invoke("threshold", "remove", "cpu", "busy_max", ">", "--system", "cal", "--shift", "3")
    assert gone.output.splitlines() == ["threshold cpu busy_max > of \\CAL (shift 3) removed",
                                        "stored violations re-evaluated on 120 hours of 1 system"]
    refused(invoke("threshold", "remove", "cpu", "busy_max", ">", "--system", "cal", "--shift", "3"),
            "measuredb: ITEM: \\CAL has no cpu threshold busy_max > for shift 3")
    refused(invoke("system", "remove", "cal"),
            "measuredb: SYSTEM: \\CAL has 1 measurement(s), 1 entity and 0 collector(s): only a system that was "
            "never measured can be removed")


def test_every_simulated_processor_type_is_a_cpu_type(conn) -> None:
    """`measuredb system set --cpu-types` takes every processor type a simulated node can have
    (the SQL list of _measure.cpu_type_names and the node's PROCESSOR_TYPES are two lists)."""
    from collector.node.topology import PROCESSOR_TYPES
    names = conn.execute("SELECT _measure.cpu_type_names()").fetchone()[0]
    assert set(PROCESSOR_TYPES) <= set(names), sorted(set(PROCESSOR_TYPES) - set(names))
