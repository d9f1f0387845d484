"""`measuredb retention show|set|run|log`."""

from __future__ import annotations

from datetime import timedelta

import pytest
from typer.testing import CliRunner

from cli.main import app
from core import schema
from core.retention import parse_keep
from tests.engine import MODE


@pytest.mark.parametrize(("text", "days"), [("35d", 35), ("35", 35), ("35 days", 35), ("12w", 84),
                                            ("2 years", 730), ("forever", None), ("Never", None)])
def test_durations(text: str, days: int | None) -> None:
    assert parse_keep(text) == (None if days is None else timedelta(days=days))


@pytest.mark.parametrize("text", ["", "35 fortnights", "-3d", "3.5d", "d"])
def test_bad_durations_say_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match="is not one of: N days"):
        parse_keep(text)


@pytest.fixture
def env(fresh_database, monkeypatch, tmp_path) -> str:
    url = fresh_database("_retention_cli")
    schema.apply(url, mode=MODE)
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    return url


def test_show_set_run_and_log(env: str) -> None:
    run = CliRunner().invoke
    shown = run(app, ["retention", "show"])
    assert shown.exit_code == 0 and "raw" in shown.output and "35 days" in shown.output
    assert "for ever" in shown.output
    changed = run(app, ["retention", "set", "raw", "60d"])
    assert changed.exit_code == 0 and changed.output.strip() == "raw data kept 60 days"
    assert "60 days" in run(app, ["retention", "show"]).output
    refused = run(app, ["retention", "set", "hour", "10d"])
    assert refused.exit_code == 2 and "hour data must be kept at least" in refused.output
    assert run(app, ["retention", "set", "nosuch", "1d"]).exit_code == 2
    bad = run(app, ["retention", "set", "raw", "soon"])
    assert bad.exit_code == 2 and "is not one of" in bad.output
    dry = run(app, ["retention", "run", "--dry-run"])
    assert dry.exit_code == 0 and dry.output.strip() == "nothing to purge"
    assert run(app, ["retention", "run"]).exit_code == 0
    log = run(app, ["retention", "log", "--limit", "5"])
    assert log.exit_code == 0 and "by cli (dry run)" in log.output and log.output.count("by cli") == 2


def test_a_too_short_raw_horizon_says_what_it_must_be(env: str) -> None:
    """Raw data must be kept at least as long as nothing (it is the first class); hour data
    at least as long as raw data: the message says so in words, never '00:00:00 longer'."""
    run = CliRunner().invoke
    assert run(app, ["retention", "set", "hour", "400d"]).exit_code == 0
    refused = run(app, ["retention", "set", "raw", "500d"])
    assert refused.exit_code == 2, refused.output
    assert "hour data must be kept at least as long as raw data; hour data is kept 400 days" in refused.output
    assert "00:00:00" not in refused.output
