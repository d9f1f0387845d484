"""`measuredb backfill --node NAME --days N --seed S`."""

from __future__ import annotations

import psycopg
from typer.testing import CliRunner

from collector import schema
from collector.cli import app
from tests.engine import MODE


def test_backfill_fills_the_database(fresh_database, monkeypatch, tmp_path) -> None:
    url = fresh_database("_backfill")
    schema.apply(url, mode=MODE)
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MEASUREDB_COLLECTOR_STEP_SECONDS", "300")  # a coarse grid keeps it quick
    monkeypatch.setenv("MEASUREDB_COLLECTOR_INTERVAL_SECONDS", "300")
    result = CliRunner().invoke(app, ["backfill", "--node", "demo", "--days", "1", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "\\DEMO: 1.0 days simulated" in result.output
    with psycopg.connect(url) as c:
        hours = c.execute("SELECT count(DISTINCT hour_at) FROM measure.cpu_hour").fetchone()[0]
        node, seed = c.execute("SELECT node, seed FROM _measure.collector_state").fetchone()
    assert hours >= 24 and (node, seed) == ("demo", 3)


def test_backfill_of_an_unknown_node_is_one_line(fresh_database, monkeypatch, tmp_path) -> None:
    url = fresh_database("_backfill_bad")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["backfill", "--node", "nosuch", "--days", "1"])
    assert result.exit_code == 2
    assert result.output.startswith("measuredb: nosuch: no such node; shipped nodes: demo,")
