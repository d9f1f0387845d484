"""Every `measuredb` command, from any folder, with no database, an empty one, and bad
arguments: one clear line and a non-zero status, never a traceback, and no embedded server
made as a side effect of a command that only reads or changes data."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from cli.main import app

pytestmark = pytest.mark.reliability  # the reliability suite (pytest -m reliability)

# arguments each command needs to get past its own parsing (valid shapes, nothing that exists)
ARGS: dict[str, list[str]] = {
    "import": ["cpu.csv"],
    "export": ["-o", "out"],
    "report schedule show": ["1"],
    "report": ["threshold", "--system", "\\DEMO", "--date", "2026-03-02"],
    "system show": ["\\DEMO"],
    "system add": ["\\NEW", "--number", "5", "--time-zone", "UTC"],
    "system set": ["\\DEMO", "--number", "4"],
    "system remove": ["\\DEMO"],
    "calendar show": ["\\DEMO"],
    "calendar set": ["\\DEMO", "--from", "2026-03-02", "--shift", "1 07:00-15:00 mon-fri day"],
    "calendar remove": ["\\DEMO", "--from", "2026-03-02"],
    "calendar holiday add": ["\\DEMO", "2026-12-25"],
    "calendar holiday remove": ["\\DEMO", "2026-12-25"],
    "threshold set": ["cpu", "busy_max", ">", "80"],
    "threshold remove": ["cpu", "busy_max", ">"],
    "analysis show": ["\\DEMO"],
    "analysis set": ["\\DEMO", "--weeks", "2"],
    "analysis reset": ["\\DEMO"],
    "analysis floor": ["cpu", "busy", "10"],
    "analysis indicator": ["cpu_queuing", "--limit", "2"],
    "component set": ["$APPL.%", "server"],
    "component remove": ["$APPL.%"],
    "retention set": ["raw", "35d"],
    "token create": ["someone"],
    "token revoke": ["someone"],
    "node sweep": ["--node", "no-such-node"],
}
# the commands that set the platform up: they may make the embedded server, and run until stopped
SERVICES = {"run", "api", "collector", "backfill", "schema apply"}
NO_DATABASE = {"node sweep", "node anomalies"}  # run in memory


def commands() -> list[str]:
    found = []

    def walk(cmd, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        if not subs or path == ["report"]:
            found.append(" ".join(path))

    walk(typer.main.get_command(app), [])
    return sorted(found)


def invoke(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{args}: {type(result.exception).__name__}: {result.exception}") from result.exception
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


def test_the_list_covers_every_command() -> None:
    listed = set(ARGS) | SERVICES | NO_DATABASE
    needing = {c for c in commands() if c not in listed}
    takes_none = {"health", "schema status", "component list", "report schedule list", "report schedule runs",
                  "report schedule run-due", "system list", "threshold list", "retention show", "retention run",
                  "retention log", "token list"}
    assert needing == takes_none, needing ^ takes_none


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch) -> Path:
    """Another folder, no DATABASE_URL, a data folder with nothing in it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "200")
    (tmp_path / "cpu.csv").write_text("SYSTEM,CPU,FROM-TIMESTAMP,TO-TIMESTAMP\n")
    return tmp_path


@pytest.mark.parametrize("command", [c for c in commands() if c not in SERVICES | NO_DATABASE])
def test_no_database_is_one_line_and_nothing_is_made(nowhere: Path, command: str) -> None:
    status, output = invoke([*command.split(), *ARGS.get(command, [])])
    assert status == 2, output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and "no database at" in lines[0] and "make run" in lines[0], output
    assert not (nowhere / "data" / "pg").exists() and not (nowhere / ".data").exists()


@pytest.mark.parametrize("command", [c for c in commands() if c not in SERVICES | NO_DATABASE | {"schema status"}])
def test_an_empty_database_is_one_line(nowhere: Path, fresh_database, monkeypatch, command: str) -> None:
    monkeypatch.setenv("DATABASE_URL", fresh_database("_empty_cli"))
    status, output = invoke([*command.split(), *ARGS.get(command, [])])
    assert status == 2, output
    assert output.strip().count("\n") == 0 and "holds no measuredb schema" in output, output


@pytest.mark.parametrize("command", commands())
def test_bad_arguments_are_a_usage_error(nowhere: Path, command: str) -> None:
    status, output = invoke([*command.split(), "--no-such-option"])
    assert status == 2 and "No such option" in output, output


# (the collector waits out an unreachable database by design: tests/collector/test_faults.py)
@pytest.mark.parametrize("command", sorted(SERVICES - {"collector"}))
def test_services_with_an_unreachable_database_are_one_line(nowhere: Path, monkeypatch, command: str) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/measuredb")
    monkeypatch.setenv("MEASUREDB_COLLECTOR_OUTAGE_WAIT_SECONDS", "0")
    status, output = invoke(command.split())
    assert status == 2, output
    assert output.strip().count("\n") == 0 and "cannot connect" in output, output


def test_help_everywhere(nowhere: Path) -> None:
    for command in commands():
        status, output = invoke([*command.split(), "--help"])
        assert status == 0 and "Usage" in output, command


def test_every_command_has_a_one_line_summary() -> None:
    """A group's command list shows each command's first paragraph as written (Typer keeps its
    line breaks there): it is one line, the details after a blank line."""

    def walk(cmd, path: list[str]) -> None:
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            first = inspect.cleandoc(sub.short_help or sub.help or "").split("\n\n")[0]
            assert first and "\n" not in first, f"measuredb {' '.join([*path, name])}: {first!r}"
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
