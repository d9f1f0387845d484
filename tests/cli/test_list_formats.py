"""List commands print text (a table), CSV or JSON, and never cut a cell short when their
output is not a terminal (a pipe, a file), however narrow the terminal would be."""

from __future__ import annotations

import csv
import io
import json

import psycopg
import pytest
from typer.testing import CliRunner

from cli.main import app
from core import schema
from tests.engine import MODE

LISTS = [["system", "list"], ["threshold", "list"], ["threshold", "list", "--system", "\\LISTS"],
         ["retention", "show"], ["report", "schedule", "list"], ["report", "schedule", "runs"],
         ["token", "list"]]


@pytest.fixture
def env(fresh_database, monkeypatch, tmp_path) -> str:
    url = fresh_database("_list_formats")
    schema.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                  "VALUES ('\\LISTS', 3, 'America/Argentina/ComodRivadavia')")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "40")  # a narrow terminal: a piped table must not follow it
    assert CliRunner().invoke(app, ["token", "create", "a-rather-long-token-name-for-a-narrow-terminal"]).exit_code == 0
    made = CliRunner().invoke(app, ["report", "schedule", "run-due", "--now", "2026-03-03T12:00:00+00:00"])
    assert made.exit_code == 0 and "run " in made.output, made.output  # report runs to list
    return url


@pytest.mark.parametrize("command", LISTS, ids=" ".join)
def test_every_list_in_every_format(env, command) -> None:
    run = CliRunner().invoke
    as_json = run(app, [*command, "--format", "json"])
    assert as_json.exit_code == 0, as_json.output
    rows = json.loads(as_json.stdout)
    assert isinstance(rows, list) and rows, command
    as_csv = run(app, [*command, "--format", "csv"])
    assert as_csv.exit_code == 0, as_csv.output
    parsed = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert len(parsed) == len(rows) and set(parsed[0]) == set(rows[0]), command
    text = run(app, command)
    assert text.exit_code == 0 and "…" not in text.stdout, text.stdout
    assert run(app, [*command, "--format", "xml"]).exit_code == 2


def test_a_piped_table_keeps_long_cells_whole(env) -> None:
    out = CliRunner().invoke(app, ["system", "list"]).stdout
    assert "America/Argentina/ComodRivadavia" in out
    out = CliRunner().invoke(app, ["threshold", "list"]).stdout
    assert "busy_max" in out and "busy_m…" not in out
