"""Tests for the `meascom` console script (cli.meascom)."""

from __future__ import annotations

import io
import sys

import httpx
import psycopg
import pytest

from cli import meascom as cli
from tests.collector.meascom.test_parser import FIGURE_3


@pytest.fixture
def env(url, db, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .env here
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def names(db) -> list[str]:
    return [r[0] for r in db.execute("SELECT name FROM _measure.measurement ORDER BY 1")]


def test_commands_and_obey_files(env, db, capsys):
    assert cli.main(["-c", "ADD CPU *\nSTART MEASUREMENT C1, INTERVAL 1 MINUTES"]) == 0
    assert "Measurement C1 (id " in capsys.readouterr().out
    (env / "fig3").write_text(FIGURE_3)
    (env / "info").write_text("INFO CPLNDAY1\n")
    assert cli.main(["fig3", "info", "--system", "\\DEMO"]) == 0
    out = capsys.readouterr().out
    assert "Measurement CPLNDAY1" in out and "\nADD COUNTER RESP-TIME, PROCESS $PROGS.SERVER1.*," \
                                              " QUEUE\n" in out
    assert names(db) == ["C1", "CPLNDAY1"]


def test_syntax_error_exit_2_runtime_error_exit_1(env, db, capsys):
    (env / "bad").write_text("ADD CPU *\nSTART MEASUREMENT B1\nADD CPU 16\n")
    assert cli.main(["bad"]) == 2
    err = capsys.readouterr().err
    assert err == ("meascom: bad: line 3, column 9: 16 is out of range; expected a CPU number "
                   "0-15 or *\n")
    assert names(db) == []
    assert cli.main(["-c", "ADD CPU *\nSTART MEASUREMENT B1\nSTART MEASUREMENT B1"]) == 1
    assert "line 3, column 1: measurement B1 is already scheduled" in capsys.readouterr().err
    assert names(db) == []
    assert cli.main(["-c", "AD CPU *"]) == 2  # no abbreviations outside the prompt
    assert cli.main(["--system", "WEST", "-c", "HELP"]) == 2
    assert "unknown system 'WEST'" in capsys.readouterr().err


def test_interactive_prompt(env, db, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(
        "AD CPU *\nLIST CPU 99\nSTAR MEASU I1,\n  INT 2 MIN\nINFO I1\nEXIT\nADD DISC *\n"))
    assert cli.main([]) == 0
    out, err = capsys.readouterr()
    assert "line 1, column 10: 99 is out of range" in err, err  # an error does not end the session
    assert "START MEASUREMENT I1, FROM " in out, (out, err)
    assert ", INTERVAL 2 MINUTES" in out
    row = db.execute("SELECT interval_us, contab FROM _measure.measurement").fetchone()
    assert row[0] == 120_000_000 and [d["type"] for d in row[1]["descriptors"]] == ["CPU"]


def test_default_system_must_be_unique(env, db, url, capsys):
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone)"
                  " VALUES ('\\WEST', 2, 'UTC')")
    try:
        assert cli.main(["-c", "HELP"]) == 2
        assert ("the database holds 2 systems (\\DEMO, \\WEST); name one with --system"
                in capsys.readouterr().err)
        assert cli.main(["--system", "west", "-c", "HELP EXIT"]) == 0
    finally:
        with psycopg.connect(url) as c:
            c.execute("DELETE FROM _measure.system WHERE system_name = '\\WEST'")


def test_api_client(monkeypatch, tmp_path, capsys):
    calls = []

    def post(url, json, headers, timeout):
        calls.append((url, json, headers))
        text = json["text"]
        if "MISSING" in text:
            return httpx.Response(404, json={"detail": "Not Found"})
        if "BAD" in text:
            return httpx.Response(422, json={"detail": {"line": 1, "column": 5,
                                                        "message": "unexpected 'BAD'"}})
        return httpx.Response(200, json={"output": "done: " + text})

    monkeypatch.setattr(httpx, "post", post)
    assert cli.main(["--api", "http://h:8000/", "--token", "t0k", "-c", "HELP"]) == 0
    assert capsys.readouterr().out == "done: HELP\n"
    assert calls[0] == ("http://h:8000/meascom", {"text": "HELP", "system": None,
                                                  "interactive": False},
                        {"Authorization": "Bearer t0k"})
    assert cli.main(["--api", "http://h:8000", "-c", "MISSING"]) == 2
    assert "has no MEASCOM endpoint (POST /meascom answered 404)" in capsys.readouterr().err
    (tmp_path / "f").write_text("ADD BAD\n")
    assert cli.main(["--api", "http://h:8000", str(tmp_path / "f")]) == 2
    assert capsys.readouterr().err.endswith("f: line 1, column 5: unexpected 'BAD'\n")
    assert cli.main(["--api", "http://h:8000"]) == 2  # no prompt over the API


@pytest.mark.parametrize("target", ["/dev/full"])
def test_an_output_that_cannot_be_written_is_the_users_condition(env, url, target, tmp_path):
    """`meascom -c HELP > /dev/full`: one line saying the output could not be written (no
    "internal error"), exit status 2; what ran stays done."""
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    with open(target, "w") as sink:
        done = subprocess.run([sys.executable, "-c", "import sys; from cli.meascom import main; sys.exit(main())",
                               "-c", "HELP"], stdout=sink, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                              env={"DATABASE_URL": url, "PYTHONPATH": str(repo), "HOME": str(tmp_path),
                                   "PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("meascom: cannot write the output: No space left on device"), done.stderr
    assert "internal error" not in done.stderr and done.stderr.count("\n") == 1
