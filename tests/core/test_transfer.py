"""A system's data and configuration together (core/transfer.py, core/configuration.py
export_configuration / import_configuration, schema/idempotent/053-config-transfer.sql):
`measuredb export -o FOLDER` writes configuration.json beside the interval records and
`measuredb import FOLDER` (or several files) loads both in one transaction, condensing once,
so that an empty database reports exactly as the source; defaults that differ become the
system's own; bad files are all reported and nothing is stored."""

from __future__ import annotations

import json
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
import pytest

from core import configuration as config
from core import schema
from core.errors import InvalidValue
from tests import analysis_data
from tests.core.test_import_export import CPU_HEADER, START, _simulated, cpu_csv, run, state
from tests.engine import MODE
from tests.snapshot import differences


def counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as c:
        return {t: c.execute(f"SELECT count(*) FROM _measure.{t}").fetchone()[0]
                for t in ("system", "interval_run", "calendar", "holiday", "threshold", "component_map", "cpu_hour")}


@pytest.fixture
def pair(fresh_database, tmp_path, monkeypatch) -> tuple[str, str]:
    source, target = fresh_database("_transfer_a"), fresh_database("_transfer_b")
    for url in (source, target):
        schema.apply(url, mode=MODE)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    return source, target


def test_a_folder_export_imported_into_an_empty_database_reports_the_same(pair, tmp_path, monkeypatch) -> None:
    source, target = pair
    _simulated(source, tmp_path)
    with psycopg.connect(source) as c:
        name = c.execute("SELECT system_name FROM _measure.system").fetchone()[0]
        # what the reports read besides the data: a calendar that moves an hour of the data into
        # another shift, a holiday, thresholds of the system (one per shift), component rows
        zone = c.execute("SELECT time_zone FROM _measure.system").fetchone()[0]
        h = START.astimezone(ZoneInfo(zone)).hour + 1  # the data's second local hour begins shift 2
        shifts = [{"shift_no": 1, "begin": "00:00", "end": f"{h:02}:00", "name": "early"},
                  {"shift_no": 2, "begin": f"{h:02}:00", "end": "00:00", "name": "rest"}]
        config.set_calendar(c, name, date(2026, 2, 23), shifts, holiday_shift=9, holiday_name="closed")
        config.set_holiday(c, name, date(2026, 3, 3), "Town fair")
        config.set_threshold(c, system=name, entity="cpu", item="busy_max", operator=">", limit=Decimal("1"),
                             shift=1, enabled=True, help="early shift")
        config.set_threshold(c, system=name, entity="disc", item="qlen_avg", operator=">", limit=Decimal("0.01"),
                             shift=None, enabled=True, help=None)
        config.set_component(c, system=name, match_on="process_name", pattern="$Z%", component="hls", priority=5)
    monkeypatch.setenv("DATABASE_URL", source)
    res = run("export", "--tier", "all", "-o", str(tmp_path / "out"))
    assert res.exit_code == 0, res.output
    assert f"configuration.json: 1 system ({name})" in res.output
    doc = json.loads((tmp_path / "out" / "configuration.json").read_text())
    assert doc["format"] == "measuredb configuration" and doc["version"] == 1
    [sys_doc] = doc["systems"]
    assert sys_doc["name"] == name and sys_doc["holidays"] == [{"day": "2026-03-03", "name": "Town fair"}]
    assert [v["effective_from"] for v in sys_doc["calendars"]] == ["2026-02-23"]
    assert {(t["entity"], t["item"], t["shift"]) for t in sys_doc["thresholds"]} == {
        ("cpu", "busy_max", 1), ("disc", "qlen_avg", None)}
    assert any(r["pattern"] == "$Z%" for r in sys_doc["components"])

    # the folder (tiers beside the records are left out) into an empty database: no system yet
    monkeypatch.setenv("DATABASE_URL", target)
    res = run("import", str(tmp_path / "out"))
    assert res.exit_code == 0, res.output
    assert f"{name} created; 1 calendar versions, 1 holidays, 2 thresholds" in res.output
    assert "left out 24 tier files (cpu-hour.csv, cpu-month.csv, cpu-shift.csv …)" in res.output
    assert "condensed into every tier" in res.output and "tiers condensed" not in res.output
    a, b = state(source, name, [date(2026, 3, 2)], [(START, START + timedelta(hours=2))], raw=False), \
        state(target, name, [date(2026, 3, 2)], [(START, START + timedelta(hours=2))], raw=False)
    assert differences(a, b) == []
    assert a["threshold[2026-03-02]"] and a["transaction_resource[0]"] and a["cpu_shift"]
    assert {r.split(",")[3] for r in a["cpu_shift"]} == {"1", "2"}  # the calendar's shifts, one hour each
    with psycopg.connect(source) as s, psycopg.connect(target) as t:
        assert config.export_configuration(s, None) == config.export_configuration(t, None)
    # again: nothing changes
    before = counts(target)
    res = run("import", str(tmp_path / "out"))
    assert res.exit_code == 0, res.output
    assert " 0 stored" in res.output and "exists" in res.output
    assert counts(target) == before


def test_the_export_s_defaults_become_the_system_s_own_where_they_differ(pair, tmp_path, monkeypatch) -> None:
    source, target = pair
    with psycopg.connect(source) as c:
        config.add_system(c, "\\HAND", number=7, time_zone="America/New_York", os_version="D46", cpu_types=[])
        c.execute("UPDATE _measure.threshold SET limit_value = 60 WHERE system_id IS NULL AND entity = 'cpu' "
                  "AND item = 'busy_max'")
        gone = c.execute("DELETE FROM _measure.threshold WHERE system_id IS NULL AND entity = 'disc' "
                         "RETURNING item, operator").fetchall()
        doc = config.export_configuration(c, ["\\hand"])
    assert gone
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "configuration.json").write_text(json.dumps(doc))
    (tmp_path / "out" / "cpu-interval.csv").write_text(cpu_csv())
    monkeypatch.setenv("DATABASE_URL", target)
    res = run("import", str(tmp_path / "out"))
    assert res.exit_code == 0, res.output
    assert "the export's default threshold CPU busy_max > 60 differs" in res.output
    assert f"this database's default threshold DISC {gone[0][0]} {gone[0][1]}" in res.output
    with psycopg.connect(source) as s, psycopg.connect(target) as t:
        want = {(r["entity"], r["item"], r["operator"], r["shift"], r["limit"])
                for r in config.thresholds(s, "\\HAND") if r["in_force"]}
        got = {(r["entity"], r["item"], r["operator"], r["shift"], r["limit"])
               for r in config.thresholds(t, "\\HAND") if r["in_force"]}
        assert got == want
        # the target's defaults are untouched: another system still reads them
        assert t.execute("SELECT limit_value FROM _measure.threshold WHERE system_id IS NULL AND entity = 'cpu' "
                         "AND item = 'busy_max'").fetchone() == (Decimal("70"),)
        assert t.execute("SELECT count(*) FROM _measure.threshold WHERE system_id IS NULL AND entity = 'disc'"
                         ).fetchone()[0] == len(gone)
        assert t.execute("SELECT count(*) FROM measure.cpu_hour").fetchone()[0] == 2  # CPUs 0 and 1, 09:00


def test_bad_files_are_all_reported_and_nothing_is_stored(pair, tmp_path, monkeypatch) -> None:
    source, target = pair
    monkeypatch.setenv("DATABASE_URL", target)
    with psycopg.connect(source) as c:
        config.add_system(c, "\\HAND", number=7, time_zone="America/New_York", os_version="D46", cpu_types=[])
        doc = config.export_configuration(c, ["\\HAND"])
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "configuration.json").write_text(json.dumps(doc))
    (folder / "a.csv").write_text(cpu_csv())
    bad = cpu_csv().replace(",90,9000,1800,", ",-90,9000,1800,")
    (folder / "b.csv").write_text(bad)
    (folder / "c.csv").write_text(",".join(CPU_HEADER) + "\n\\HAND,0,yesterday,today,1,1,1,1,1,1,1,1\n")
    before = counts(target)
    res = run("import", str(folder))
    assert res.exit_code == 2, res.output
    assert f"{folder / 'b.csv'}:2: SWAPS:" in res.output and f"{folder / 'c.csv'}:2: FROM-TIMESTAMP" in res.output
    assert "2 of 3 files cannot be imported; nothing was stored" in res.output
    assert counts(target) == before  # not even the system of the configuration
    # the good file and the configuration, named one by one
    res = run("import", str(folder / "configuration.json"), str(folder / "a.csv"))
    assert res.exit_code == 0, res.output
    assert counts(target)["system"] == 1 and counts(target)["cpu_hour"] > 0

    # a configuration that does not fit this database says where and how
    doc["systems"][0]["time_zone"] = "Europe/Berlin"
    (folder / "configuration.json").write_text(json.dumps(doc))
    res = run("import", str(folder / "configuration.json"))
    assert res.exit_code == 2
    assert "systems[0].time_zone: \\HAND exists here with the time zone America/New_York, the export says " \
           "Europe/Berlin" in res.output and "Traceback" not in res.output
    doc["systems"][0]["time_zone"] = "America/New_York"
    doc["systems"][0]["calendars"] = [{"effective_from": "2026-01-05", "shifts": [{"shift_no": 1, "begin": "7:30",
                                                                                     "end": "15:00"}]}]
    with psycopg.connect(target) as t, pytest.raises(InvalidValue) as err:
        config.import_configuration(t, doc)
    assert err.value.field == "systems[0].calendars[0].shifts[0].begin"
    assert str(err.value).startswith("systems[0].calendars[0]: shifts[0].begin:")
    for text, words in (("{", "configuration.json (line 1, column 2): not JSON"),
                        ('{"format": "x"}', "format: not a measuredb configuration"),
                        ('{"format": "measuredb configuration", "version": 9}', "version: 9 is not a version"),
                        ('{"format": "measuredb configuration", "version": 1, "systems": {}}', "systems: give a list")):
        (folder / "configuration.json").write_text(text)
        res = run("import", str(folder / "configuration.json"))
        assert res.exit_code == 2 and words in res.output, (text, res.output)
    # the bytes read are limited, not the bytes announced
    (folder / "configuration.json").write_bytes(b" " * (config.CONFIGURATION_MAX_BYTES + 10))
    res = run("import", str(folder / "configuration.json"))
    assert res.exit_code == 2 and "larger than 16 MiB" in res.output
    for args, words in ((("-", str(folder / "a.csv")), "- (stdin) is read alone"),
                        ((str(folder / "a.csv"), str(folder / "a.csv")), "a file is given twice"),
                        ((str(tmp_path / "nowhere"),), "no such file or folder")):
        res = run("import", *args)
        assert res.exit_code == 2 and words in res.output, res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run("import", str(empty))
    assert res.exit_code == 2 and "no configuration.json, .csv or .parquet file" in res.output


def test_export_into_one_file_has_no_configuration(pair, tmp_path, monkeypatch) -> None:
    source, _ = pair
    with psycopg.connect(source) as c:
        config.add_system(c, "\\HAND", number=7, time_zone="America/New_York", os_version="D46", cpu_types=[])
    monkeypatch.setenv("DATABASE_URL", source)
    res = run("export", "--entity", "cpu", "-o", str(tmp_path / "cpu.csv"))
    assert res.exit_code == 0 and not (tmp_path / "configuration.json").exists()
    res = run("export", "--no-configuration", "-o", str(tmp_path / "out"))
    assert res.exit_code == 0 and not (tmp_path / "out" / "configuration.json").exists()
    assert Path(tmp_path / "out" / "cpu-interval.csv").exists()


def test_a_system_s_analysis_settings_go_with_its_data(pair, tmp_path, monkeypatch) -> None:
    """\\ANA (tests/analysis_data.py) with one week learned, exported with its data into an empty
    database: its exceptions there are the source's; the floors and indicators, which every system
    of the target takes, are said in notes and left as they are."""
    source, target = pair
    with psycopg.connect(source) as c:
        analysis_data.load(c)
        changed = config.set_analysis(c, analysis_data.SYSTEM, weeks=1, minor=4, major=20)
        assert changed["rejudged"]["hours"] == analysis_data.JUDGED_HOURS
        config.set_analysis_floor(c, "disc", "busy", 12)            # no disc in \ANA: its exceptions stay
        config.set_analysis_indicator(c, "cpu_queuing", limit=3)
    assert analysis_data.exceptions(source) == analysis_data.ONE_WEEK_EXCEPTIONS
    monkeypatch.setenv("DATABASE_URL", source)
    res = run("export", "-o", str(tmp_path / "out"))
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "out" / "configuration.json").read_text())
    assert doc["systems"][0]["analysis"] == {"weeks": 1, "minor": 4, "major": 20, "relative_floor": 0.25}
    assert {"entity": "disc", "item": "busy", "floor": 12} in doc["defaults"]["baseline_floors"]

    monkeypatch.setenv("DATABASE_URL", target)
    res = run("import", str(tmp_path / "out"))
    assert res.exit_code == 0, res.output
    notes = [ln.strip() for ln in res.output.splitlines() if ln.startswith("  ")]
    assert notes == [
        "\\ANA: analysis settings weeks 1, minor 4, major 20, relative_floor 0.25 set (0 hours judged again)",
        "the export's baseline floor of disc busy (12) differs from this database's (10); not applied: it applies "
        "to every system (measuredb analysis floor disc busy 12)",
        "the export's health indicator cpu_queuing (limit 3, weight 15) differs from this database's (limit 2, "
        "weight 15); not applied: it applies to every system (measuredb analysis indicator cpu_queuing --limit 3 "
        "--weight 15)"]
    # the data condensed after the settings were set: judged with one week, as in the source
    assert analysis_data.exceptions(target) == analysis_data.ONE_WEEK_EXCEPTIONS
    with psycopg.connect(source) as s, psycopg.connect(target) as t:
        assert config.analysis(t, "ana")["settings"] == config.analysis(s, "ana")["settings"]
        assert t.execute("SELECT floor FROM _measure.baseline_item WHERE entity = 'disc' AND item = 'busy'"
                         ).fetchone() == (10,)
        # settings that break the rules say where, and nothing is applied
        doc["systems"][0]["analysis"] = {"weeks": 1, "minor": 4, "major": 3}
        with pytest.raises(InvalidValue) as err:
            config.import_configuration(t, doc)
        assert err.value.field == "systems[0].analysis.major"
        assert str(err.value).startswith("systems[0].analysis: major: 3 is not above the minor band (4)")
        t.rollback()
        doc["systems"][0]["analysis"] = {"weeks": 4, "minor": 3, "major": 5, "relative_floor": 0.25}
        assert config.import_configuration(t, doc)["notes"][0] == (
            f"\\ANA: analysis settings weeks 4, minor 3, major 5, relative_floor 0.25 set "
            f"({analysis_data.JUDGED_HOURS} hours judged again)")
    assert analysis_data.exceptions(target) == analysis_data.DEFAULT_EXCEPTIONS
