"""`measuredb analysis`: the automatic analysis's settings on the command line, on the data set
of tests/queries/test_analysis.py (\\ANA: 35 days of one measured hour; tests/analysis_data.py).
A change judges the stored hours again in the same transaction and says how many; bad values
are one line naming the option, exit status 2, nothing applied."""

from __future__ import annotations

import json
from datetime import date

import psycopg
import pytest

from core import reports, schema
from tests import analysis_data
from tests.analysis_data import (
    DEFAULT_EXCEPTIONS,
    JUDGED_HOURS,
    ONE_WEEK_EXCEPTIONS,
    exceptions,
    stored_rows,
)
from tests.cli.test_configuration import invoke, refused
from tests.engine import MODE


@pytest.fixture
def env(fresh_database, monkeypatch, tmp_path) -> str:
    url = fresh_database("_analysis_cli")
    schema.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        analysis_data.load(c)
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    return url


def rebuilt_line(url: str) -> str:
    return f"baselines rebuilt: {JUDGED_HOURS} hours of 1 system judged again ({stored_rows(url)} rows)"


def stored_settings(url: str) -> list[tuple]:
    with psycopg.connect(url) as c:
        return c.execute("SELECT weeks, minor, major, relative_floor FROM _measure.analysis_setting").fetchall()


def test_setting_one_week_changes_the_exceptions_as_the_sql_does(env: str) -> None:
    assert exceptions(env) == DEFAULT_EXCEPTIONS
    done = invoke("analysis", "set", "ana", "--weeks", "1", "--minor", "4", "--major", "20")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [
        "analysis settings of \\ANA: weeks 1 (default 4), minor 4 (default 3), major 20 (default 5), "
        "relative_floor 0.25 (default)", rebuilt_line(env)]
    assert exceptions(env) == ONE_WEEK_EXCEPTIONS
    assert stored_settings(env) == [(1, 4.0, 20.0, 0.25)]

    shown = invoke("analysis", "show", "ana", "--format", "json")
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.output)
    assert doc["settings"] == [
        {"setting": "weeks", "value": 1, "default": 4, "source": "system"},
        {"setting": "minor", "value": 4, "default": 3, "source": "system"},
        {"setting": "major", "value": 20, "default": 5, "source": "system"},
        {"setting": "relative_floor", "value": 0.25, "default": 0.25, "source": "default"}]
    assert {"entity": "cpu", "item": "busy", "floor": 10} in doc["floors"]
    assert [i["indicator"] for i in doc["indicators"]][:2] == ["cpu_over_utilised", "cpu_queuing"]
    text = invoke("analysis", "show", "ana")
    rows = [[c.strip() for c in x.strip("│ ").split("│")] for x in text.output.splitlines() if x.count("│") == 5]
    assert rows[:4] == [["weeks", "1", "4", "system"], ["minor", "4", "3", "system"], ["major", "20", "5", "system"],
                        ["relative_floor", "0.25", "0.25", "default"]]

    # the same values again: nothing to judge
    again = invoke("analysis", "set", "ana", "--weeks", "1")
    assert again.output.splitlines()[1] == "what the baselines learn is unchanged or no hour is stored: nothing judged again"
    back = invoke("analysis", "reset", "ana")
    assert back.exit_code == 0, back.output
    assert back.output.splitlines() == [
        "analysis settings of \\ANA: weeks 4 (default), minor 3 (default), major 5 (default), "
        "relative_floor 0.25 (default)", rebuilt_line(env)]
    assert exceptions(env) == DEFAULT_EXCEPTIONS and stored_settings(env) == []


BAD = [
    ("set ana --weeks 0", "--weeks: 0 is not from 1 to 52 (the earlier weeks a baseline learns from)"),
    ("set ana --weeks 1 --major 2", "--major: 2 is not above the minor band (3)"),
    ("set ana --weeks 1 --minor 6", "--minor: 6 is not below the major band (5)"),
    ("set ana --minor -1", "--minor: -1 is not above 0 (the minor band, in robust standard deviations)"),
    ("set ana --relative-floor -0.5",
     "--relative-floor: -0.5 is not 0 or more (the smallest band as a share of the median)"),
    ("set ana --minor lots", "--minor: 'lots' is no number"),
    ("set ana --minor nan", "--minor: 'nan' is no finite number"),
    ("set ana", "give at least one of --weeks, --minor, --major, --relative-floor"),
    ("set nosuch --weeks 2", "SYSTEM: unknown system nosuch (systems: \\ANA)"),
    ("floor cpu busy_max 5", "ITEM: busy_max is no baseline item of cpu (busy, qlen)"),
    ("floor volume busy 5", "ENTITY: volume has no baseline items (cpu, disc, line, process, terminal, tmf, userdef)"),
    ("floor cpu busy 0", "FLOOR: 0 is not above 0 (in the item's unit)"),
    ("indicator cpu_queuing --weight 40", "--weight: 40 would make the weights add up to 125 (at most 100: the score "
                                          "is 100 minus the weights of the indicators present)"),
    ("indicator cpu_queuing --limit -1", "--limit: -1 is not 0 or more"),
    ("indicator cpu_queuing", "give --limit, --weight or both"),
    ("indicator cpu_queueing --limit 3", "INDICATOR: cpu_queueing is no indicator of the health verdict "
     "(cpu_over_utilised, cpu_queuing, cpu_load_balance, disc_over_utilised, disc_queuing, line_over_utilised, "
     "busy_high_priority_process, transient_processes, dynamic_file_opens, file_ios_per_transaction)"),
]


def test_bad_values_are_one_line_and_change_nothing(env: str) -> None:
    for args, line in BAD:
        refused(invoke("analysis", *args.split()), f"measuredb: {line}")
    assert stored_settings(env) == [] and exceptions(env) == DEFAULT_EXCEPTIONS
    with psycopg.connect(env) as c:
        assert c.execute("SELECT floor FROM _measure.baseline_item WHERE entity = 'cpu' AND item = 'busy'"
                         ).fetchone() == (10,)
        assert c.execute("SELECT limit_value, weight FROM _measure.health_indicator WHERE indicator = 'cpu_queuing'"
                         ).fetchone() == (2, 15)


def test_a_floor_and_an_indicator(env: str) -> None:
    # CPU busy floor 20: scale max(20, 0.25 x 40) / 3 = 20/3, minor band 20-60: 55 % is 2.25 scales
    # above (within), 90 % 7.5 (major)
    done = invoke("analysis", "floor", "cpu", "busy", "20")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == ["floor of cpu busy set to 20", rebuilt_line(env)]
    assert exceptions(env) == [("2024-04-24 10:00:00", 7.5, "major", 3), ("2024-05-01 10:00:00", 7.5, "major", 4)]
    # the verdict reads the limit when it runs: CPU 0's 90 % is no longer above 95, and the score
    # of 2024-05-01 is 100 - 10 (load balance) - 10 (line) - 10 (priority) - 5 (file I/Os)
    ok = invoke("analysis", "indicator", "cpu_over_utilised", "--limit", "95", "--weight", "15")
    assert ok.exit_code == 0, ok.output
    assert ok.output.strip() == "indicator cpu_over_utilised: limit 95, weight 15 (the weights add up to 95)"
    with psycopg.connect(env) as c:
        rows = reports.run_report(c, "health-verdict", system="\\ANA", day=date(2024, 5, 1))
    assert [r["indicator"] for r in rows if r["verdict"]] == [
        "cpu_load_balance", "line_over_utilised", "busy_high_priority_process", "file_ios_per_transaction"]
    assert {r["score"] for r in rows} == {65}
