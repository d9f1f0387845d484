"""Fuzz tests of the `meascom` command (cli.meascom) on a real database: whatever
the input (random text, control characters, NUL, very long words, MEASCOM keyword salad,
random OUT/OBEY file names, random bytes as OBEY files or on piped stdin, a closed stdout)
there is no traceback, the exit status is 0, 1 or 2 (141 for a closed stdout), and every
error is one ``meascom: …`` line that names the line and column of the input text (and the
file, when it comes from a file).

Hypothesis runs derandomized with bounded example counts (the file takes well under a
minute); commands run in-process through ``cli.main`` except the closed-pipe cases, which
need a real process and a real pipe.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from cli import meascom as cli
from collector.meascom import ast
from collector.meascom.parser import (
    COMMANDS,
    COUNTER_TYPES,
    DURATION_UNITS,
    ENTITY_TYPES,
    LIST_OPTIONS,
    RELOPS,
    REPORT_ATTRS,
    START_OPTIONS,
    printable,
)

pytestmark = pytest.mark.reliability  # the reliability suite (pytest -m reliability)

ROOT = Path(__file__).resolve().parents[3]
_FUZZ = settings(deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow, HealthCheck.data_too_large])




def fuzz(examples: int) -> settings:
    return settings(_FUZZ, max_examples=examples)


# "meascom: [FILE: ]line L, column C: message" (FILE may itself contain ': ')
POSITIONED = re.compile(r"meascom: (?:.*: )?line [1-9]\d*, column [1-9]\d*: \S")


@pytest.fixture
def env(url, db, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .env here; OUT files land here
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("MEASCOM_TRACEBACK", raising=False)
    return tmp_path


def commands(text: str) -> list[str]:
    """The arguments of ``-c text`` (a text starting with '-' attached, or it is an option)."""
    return ["-c" + text] if text.startswith("-") else ["-c", text]


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    """``cli.main(argv)``: no exception may escape; the status and the output are sane."""
    try:
        status = cli.main(argv)
    except BaseException as exc:  # noqa: BLE001 - that is the failure being looked for
        pytest.fail(f"{type(exc).__name__} escaped main({argv!r:.300}): {exc!r:.300}")
    out, err = capsys.readouterr()
    assert status in (0, 1, 2), (status, err)
    assert "Traceback" not in err and "internal error" not in err, err
    if status:
        assert err.startswith("meascom: ") and err.endswith("\n"), err
        assert err.count("\n") == 1 and err[:-1].isprintable(), err  # one line
    return status, out, err


def assert_positioned(err: str, file: str | None = None) -> None:
    """Every error line names line and column (and the file when it comes from one)."""
    for line in err.removesuffix("\n").split("\n") if err else []:
        assert POSITIONED.match(line), line
        assert line.isprintable(), line  # control characters of the input come escaped
        if file is not None:
            assert line.startswith(f"meascom: {printable(file)}: "), (file, line)


# ------------------------------------------------------------------ strategies

KEYWORDS = sorted({
    *COMMANDS, *ENTITY_TYPES, *COUNTER_TYPES, *DURATION_UNITS, *REPORT_ATTRS, *START_OPTIONS,
    *LIST_OPTIONS, *ast.MONTHS, *(v for vs in REPORT_ATTRS.values() if vs for v in vs),
    "MEASUREMENT", "MEASSUBSYS", "REPORT", "COUNTER", "PROCESS", "ARRAY", "SYSTEM-PROCESSES",
    "MB", "GB", "OUT"})
PUNCT = [",", "(", ")", "/", "*", "&", "!", "==", "=", *RELOPS, '"', "\n", "\t", "\r", " "]
CONTROL = st.sampled_from(["\x00", "\x01", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x7f",
                           "\x85", "\u2028", "\ufeff", "\udcff", "\ud800"])
ATOM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789$\\#.*_^:-"

words = st.one_of(
    st.sampled_from(KEYWORDS),
    st.sampled_from(KEYWORDS).map(str.lower),
    st.sampled_from(KEYWORDS).map(lambda k: k[:2]),  # abbreviations
    st.sampled_from(PUNCT),
    st.integers(0, 10**25).map(str),
    st.tuples(st.integers(0, 99), st.integers(0, 99)).map(lambda t: f"{t[0]}:{t[1]:02}"),
    st.sampled_from(["$DATA1", "$PROGS.SERVER1.*", "\\DEMO", "$*", "=_DEF", "M1", "M2",
                     "29", "FEB", "1984", "2047", "0", "15", "16", "9999", "10000"]),
    st.text(ATOM, min_size=1, max_size=12),
    st.integers(1, 5000).map(lambda n: "X" * n),  # very long words
    st.text(max_size=8).map(lambda t: f'"{t}"'),
    CONTROL,
    st.text(max_size=6),
)
keyword_salad = st.lists(words, max_size=30).map(" ".join)

# commands that get past the parser and run (measurements, reports, OUT, OBEY, dates)
RUNNABLE = [
    "ADD CPU *", "ADD DISC $DATA1", "ADD PROCESS SYSTEM-PROCESSES", "DELETE CPU 3",
    "ADD COUNTER RESP-TIME, PROCESS $PROGS.SERVER1.*, QUEUE", "DELETE COUNTER *",
    "START MEASUREMENT M1", "START MEASUREMENT M2, FOR 1 HOURS, INTERVAL 1 MINUTES",
    "START MEASUREMENT M1, FROM 00:05, FOR 24 HOURS", "START MEASUREMENT M2, FROM 29 FEB, 10:00",
    "START MEASUREMENT M2, FROM 1 JAN 1984, 00:00, TO 31 DEC 2047, 23:59:59",
    "START MEASUREMENT M1, TO 00:01", "STOP MEASUREMENT M1", "STOP MEASUREMENT M2",
    "ASSUME MEASUREMENT M1", "ADD MEASUREMENT M2", "INFO M1", "INFO MEASUREMENT M1, M2",
    "STATUS", "STATUS MEASUREMENT M1", "STATUS MEASSUBSYS", "SET REPORT FORMAT STRUCTURED",
    "SET REPORT RATE OFF, TOTALS ONLY", "SET REPORT FROM 29 FEB, 00:00",
    "LIST CPU *", "LISTALL CPU *, FROM 23:00, FOR 1 HOURS", "LIST DISC *, BY READS",
    "LIST CPU *, IF CPU-BUSY-TIME > 5", "LISTACTIVE CPU *", "HELP", "HELP ADD",
    "VOLUME $VOL.SUB", "VOLUME", "OUT RESULT", "OUT", "INFO /OUT INFOF/ M1",
    "STATUS /OUT STAT/", "LIST /OUT LISTF/ CPU *", "EXIT",
]
FAILING = ["OBEY MISSING", 'OBEY "sub dir/x"', "START MEASSUBSYS", "HELP FOO"]


def _insert(text: str, edit: tuple[int, str] | None) -> str:
    if edit is None:
        return text
    pos = edit[0] % (len(text) + 1)
    return text[:pos] + edit[1] + text[pos:]


runnable_script = st.builds(  # runs (or is refused) unless the one edit breaks it
    _insert,
    st.lists(st.sampled_from(RUNNABLE), min_size=1, max_size=8).map("\n".join),
    st.none() | st.tuples(st.integers(0, 400),
                          words | st.sampled_from(FAILING).map(lambda x: f"\n{x}\n")))

any_text = st.one_of(st.text(max_size=200), keyword_salad, runnable_script,
                     st.lists(st.one_of(st.text(max_size=20), words), max_size=20).map("".join))
# OUT targets are MEASCOM names (no '/'): random, long (file system limit 255), odd
out_names = st.one_of(st.text(ATOM, min_size=1, max_size=400),
                      st.sampled_from([".", "..", "...", "$S.#LIST", "X" * 255, "X" * 256,
                                       "X" * 300, "A.B.C", "*", "-", "\\"]))
# OBEY names: quoted strings may hold anything but '"' and a line end (NUL included)
obey_names = st.text(st.characters(exclude_characters='"\n\r'), min_size=1, max_size=300)


# ------------------------------------------------------------------ the regressions found


def test_out_with_a_300_character_name(env, capsys):
    name = "A" * 300
    status, _, err = run(capsys, ["-c", f"OUT {name}\nHELP"])
    assert status == 2
    assert err.startswith("meascom: line 1, column 1: cannot write OUT file 'AAAA")
    assert err.endswith(": File name too long\n")
    status, _, err = run(capsys, ["-c", f"HELP\nSTATUS /OUT {name}/"])
    assert status == 2 and err.startswith("meascom: line 2, column 1: cannot write OUT file")
    status, _, err = run(capsys, ["-c", "OUT ..\nHELP"])
    assert (status, err) == (2, "meascom: line 1, column 1: cannot write OUT file '..': it is "
                                "a directory\n")


def test_binary_obey_file_is_bad_input_with_its_position(env, capsys):
    (env / "bin").write_bytes(b"HELP\n== ok\nADD CPU * \xff\xfe\n")
    status, _, err = run(capsys, ["bin"])
    assert (status, err) == (2, "meascom: bin: line 3, column 11: not UTF-8 text: byte 0xFF "
                                "(is this a binary file?)\n")
    (env / "nul").write_bytes(b"HELP\r\nHELP ! a comment \x00\n")
    status, _, err = run(capsys, ["nul"])
    assert (status, err) == (2, "meascom: nul: line 2, column 18: NUL character: an OBEY file "
                                "is text (is this a binary file?)\n")
    (env / "top").write_text("HELP\n  OBEY bin\n")  # nested: positioned in the nested file
    status, _, err = run(capsys, ["top"])
    assert (status, err[:37]) == (2, "meascom: bin: line 3, column 11: not ")
    (env / "bom").write_bytes(b"\xef\xbb\xbfHELP EXIT\n")  # a byte order mark is fine
    assert run(capsys, ["bom"])[0] == 0


def test_file_errors_exit_2_and_refusals_exit_1(env, capsys):
    status, _, err = run(capsys, ["nosuch"])
    assert (status, err) == (2, "meascom: nosuch: cannot read OBEY file: No such file or "
                                "directory\n")
    status, _, err = run(capsys, ["."])
    assert (status, err) == (2, "meascom: .: cannot read OBEY file: Is a directory\n")
    status, _, err = run(capsys, ["N" * 300])
    assert status == 2 and err.endswith(": cannot read OBEY file: File name too long\n")
    status, _, err = run(capsys, ["-c", "HELP\nOBEY MISSING"])
    assert status == 2 and err.startswith("meascom: line 2, column 1: OBEY file 'MISSING' not "
                                          "found")
    status, _, err = run(capsys, ["-c", 'OBEY "' + "O" * 300 + '"'])
    assert status == 2 and err.endswith(": File name too long\n"), err
    (env / "self").write_text("OBEY self\n")
    status, _, err = run(capsys, ["self"])
    assert status == 2 and "OBEY files nest at most 8 deep" in err
    status, _, err = run(capsys, ["-c", "START MEASUREMENT M1"])  # nothing to measure: refused
    assert status == 1 and err.startswith("meascom: line 1, column 1: nothing to measure")
    status, _, err = run(capsys, ["-c", "ADD CPU *\nSTART MEASUREMENT M9, FROM 29 FEB 2025, 1:00"])
    assert status == 2 and "FEB has no day 29" in err


def test_out_file_write_error_undoes_the_text(env, db, capsys):
    (env / "X").symlink_to(env / "no-such-dir" / "x")  # a name that passes, a write that fails
    (env / "Z").write_text("before\n")
    status, _, err = run(capsys, ["-c", "ADD CPU *\nSTART MEASUREMENT W1\nOUT Y\nHELP\n"
                                        "OUT Z\nHELP\nOUT X\nHELP EXIT"])
    assert (status, err) == (2, "meascom: line 8, column 1: cannot write OUT file 'X': No such "
                                "file or directory\n")
    assert db.execute("SELECT count(*) FROM _measure.measurement").fetchone()[0] == 0
    assert not (env / "Y").exists()  # created for this text: removed again
    assert (env / "Z").read_text() == "before\n"  # cut back


def test_bad_options_one_line(env, capsys):
    assert run(capsys, ["--bogus"]) == (2, "", "meascom: unrecognized arguments: --bogus "
                                               "(meascom --help for usage)\n")
    status, _, err = run(capsys, ["-c"])
    assert status == 2 and err.startswith("meascom: argument -c: expected one argument")
    assert run(capsys, ["-c", "HELP", "file"])[2] == "meascom: give OBEY files or -c, not both\n"
    status, out, _ = run(capsys, ["--help"])
    assert status == 0 and "Exit status: 0 ok, 1 a command refused, 2 bad input" in out
    for api in ("http://[bad", "ftp://x", "http://127.0.0.1:1", "\x00"):
        status, _, err = run(capsys, ["--api", api, "-c", "HELP"])
        assert status == 2 and err.startswith("meascom: cannot reach the API at "), err
    status, _, err = run(capsys, ["--api", "http://127.0.0.1:1", "nosuch\x00"])
    assert (status, err) == (2, "meascom: nosuch\\x00: cannot read OBEY file: embedded null "
                                "byte\n")


def test_closed_stdout_and_binary_stdin(env, url):
    """In a real process: `meascom -c … | head -1` exits 141 quietly (no BrokenPipeError,
    no traceback); piped stdin that is not text is reported line by line."""
    environ = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(ROOT), "HOME": str(env)}
    environ.pop("MEASCOM_TRACEBACK", None)
    cmd = [sys.executable, "-m", "cli.meascom"]
    many = "\n".join(["HELP START"] * 3000)  # ~1 MB of output: more than a pipe holds
    script = f"{' '.join(cmd)} -c \"$1\" | head -1; echo \"status=${{PIPESTATUS[0]}}\""
    r = subprocess.run(["bash", "-c", script, "bash", many], env=environ, cwd=env,
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.splitlines() == ["START MEASUREMENT name [, FROM [date,] hh:mm[:ss]] [, FOR "
                                     "n {SECONDS|MINUTES|HOURS}", "status=141"], r
    assert r.stderr == "", r.stderr
    # the reader is gone before anything is written (the error path as well)
    for args, expect in ((["-c", "HELP"], 141), (["-c", "HELP FOO"], 1)):
        p = subprocess.Popen([*cmd, *args], env=environ, cwd=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        p.stdout.close()
        err = p.stderr.read().decode()
        assert p.wait(timeout=60) == expect, err
        assert "Traceback" not in err and "Exception ignored" not in err, err
    # stdin that is not text, piped: each bad line is reported and skipped
    p = subprocess.run([*cmd], input=b"HELP EXIT\xff\nLIST CPU 99\nHELP \x00\nEXIT\n",
                       env=environ, cwd=env, capture_output=True, timeout=60)
    assert p.returncode == 0
    assert p.stderr.decode().splitlines() == [
        "meascom: stdin: line 1, column 10: not UTF-8 text: byte 0xFF",
        "meascom: line 1, column 10: 99 is out of range; expected a CPU number 0-15 or *",
        "meascom: line 1, column 6: NUL character: MEASCOM input is text (is this a binary "
        "file?)"]


# ------------------------------------------------------------------ fuzz


@fuzz(400)
@given(any_text)
@example("ADD CPU *\nSTART MEASUREMENT M2, FROM 29 FEB, 10:00")
@example("OUT " + "A" * 300 + "\nHELP")
@example("HELP \x00")
@example("HELP \udcff")
@example("X" * 100_000)
def test_fuzz_commands(env, capsys, text):
    status, _, err = run(capsys, commands(text))
    event(f"exit {status}")  # pytest --hypothesis-show-statistics: how many got past parsing
    if status:
        assert_positioned(err)


@fuzz(150)
@given(runnable_script)
def test_fuzz_runnable_scripts(env, capsys, text):
    """Scripts that mostly parse: measurements, reports, OUT files, dates really run."""
    status, _, err = run(capsys, commands(text))
    event(f"exit {status}")
    if status:
        assert_positioned(err)


@fuzz(150)
@given(out_names, st.sampled_from(["OUT {}\nHELP", "STATUS /OUT {}/", "OUT {}\nOUT\nHELP",
                                   "HELP\nOUT {}\nINFO /OUT {}/ M1", "LIST /OUT {}/ CPU *"]))
def test_fuzz_out_file_names(env, capsys, name, template):
    status, _, err = run(capsys, ["-c", template.format(name, name)])
    if status:
        assert_positioned(err)
    if template == "OUT {}\nHELP" and status == 0:  # the output went to that file
        assert any(p.name.upper() == name.upper() for p in env.iterdir())


@fuzz(150)
@given(obey_names, st.booleans(), st.text(max_size=40))
def test_fuzz_obey_file_names(env, capsys, name, create, body):
    """OBEY "name" inside text, and the name as a command-line file."""
    path = env / name
    short = len(name.encode("utf-8", "surrogatepass")) < 250
    if create and short and "/" not in name and "\x00" not in name:
        try:
            path.write_text(body, errors="surrogateescape")
        except (OSError, ValueError):  # a name or text the file system cannot take
            pass
    status, _, err = run(capsys, ["-c", f'HELP\nOBEY "{name}"'])
    if status:
        assert_positioned(err)
    status, _, err = run(capsys, ["--", name])
    if status:
        assert err.startswith(f"meascom: {printable(name)}: "), err


@fuzz(150)
@given(st.one_of(st.binary(max_size=300),
                 st.tuples(runnable_script, st.binary(max_size=40)).map(
                     lambda t: t[0].encode("utf-8", "surrogatepass") + b"\n" + t[1])))
@example(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
@example(b"\xff\xfe" + "HELP\n".encode("utf-16-le"))
def test_fuzz_binary_obey_files(env, capsys, data):
    (env / "blob").write_bytes(data)
    status, _, err = run(capsys, ["blob"])
    try:
        text_ok = "\x00" not in data.decode("utf-8")
    except UnicodeDecodeError:
        text_ok = False
    if not text_ok:
        assert status == 2, err
    if status:
        assert_positioned(err)
        assert err.startswith("meascom: blob: line "), err


@fuzz(100)
@given(st.one_of(st.binary(max_size=300),
                 st.lists(st.one_of(runnable_script, keyword_salad), max_size=4).map(
                     lambda xs: "\n".join(xs).encode("utf-8", "surrogatepass"))))
def test_fuzz_piped_stdin(env, capsys, monkeypatch, data):
    """The prompt reading piped stdin: errors are reported, positioned, and the session goes
    on to the end (exit 0)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    status, _, err = run(capsys, [])
    assert status == 0, err
    assert_positioned(err)
