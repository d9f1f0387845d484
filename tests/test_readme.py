"""The README is executable (issue 28, item 3): every ```sh block that shows `measuredb`,
`meascom` or `curl` runs as written, in README order, in one bash shell, against a database
of its own, and the figures the README quotes for those commands are checked here. So the
README and the program cannot drift apart: a changed option, output or default breaks this
test.

What the harness adds to the README's text, and nothing else:

* it starts in the project folder (the README's `export PATH="$PWD/.venv/bin:$PATH"` is
  meant to run there) and moves to a fresh empty folder right after that line, so every
  other command runs from elsewhere, as a user's would;
* `/tmp/demo-week` (the README's MEASUREDB_DATA_DIR) becomes a temporary folder and port
  8001 a free port;
* "`measuredb api --port 8001` in a second terminal" runs in the background before the first
  block that calls 127.0.0.1:8001, and the harness waits for it to answer;
* a ```csv block introduced by "(`NAME`):" is written to NAME;
* `curl` fails on an HTTP error (--fail-with-body), so an error answer fails the test.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import typer.main

from cli.main import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DATA_DIR = "/tmp/demo-week"
PORT = "8001"
API = "measuredb api --port 8001"

# The ```sh blocks that do not run here (first command line -> why). Every other block that
# shows measuredb, meascom or curl runs; a block that shows neither and is not listed here
# fails the test, so a new block is either run or said to be left out.
NOT_RUN = {
    "make run     # 1. the platform: PostgreSQL, schema, collector (simulated node \\DEMO), API on :8000":
        "the whole platform in the foreground; tests/cli/test_run.py runs `measuredb run` and Ctrl-C, "
        "and `make test` is what runs this file",
    "cp .env.example .env          # fill in every *PASSWORD* (openssl rand -hex 24)":
        "docker compose: no Docker engine here (tests/test_compose.py checks the compose file)",
    "docker compose exec collector measuredb token create grafana-alerts --scope read":
        "docker compose: no Docker engine here; the same commands run in this file without the prefix",
    "measuredb backfill --node today --start 2026-11-23 --days 1    # a few minutes":
        "a day of \\TODAY takes minutes; tests/test_today.py backfills half an hour of it the same way "
        "(the collector's default measurement) and checks these four reports",
}


@dataclass
class Block:
    lang: str
    text: str
    line: int  # the README line of the opening fence
    before: str  # the text just above the block


def blocks() -> list[Block]:
    out, lines = [], README.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m:
            j = i + 1
            while not lines[j].startswith("```"):
                j += 1
            out.append(Block(m.group(1), "\n".join(lines[i + 1:j]), i + 1, "\n".join(lines[max(0, i - 3):i])))
            i = j
        i += 1
    return out


def commands(block: Block) -> list[str]:
    """The command lines of a block (a line that is only a comment continues the one above)."""
    return [ln for ln in block.text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def runs(block: Block) -> bool:
    if block.lang == "sh" and commands(block) and commands(block)[0] in NOT_RUN:
        return False
    return block.lang == "sh" and any(re.match(r"(measuredb|meascom|curl|TOKEN=|export )", c)
                                      for c in commands(block))


def test_every_shell_block_is_run_or_said_not_to_be() -> None:
    shell = [b for b in blocks() if b.lang == "sh"]
    left_out = {commands(b)[0] for b in shell if not runs(b)}
    assert left_out == set(NOT_RUN), left_out ^ set(NOT_RUN)
    assert any(runs(b) for b in shell)
    assert f"`{API}`" in README.read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def script(work: Path, data: Path, port: int) -> tuple[str, list[str]]:
    """The bash script of the README's blocks, and its command lines in order (each one's
    output follows a line `@@@ <n>` in what the script prints)."""
    parts = ["set -euo pipefail", f"cd {shlex.quote(str(ROOT))}",
             "curl() { command curl --fail-with-body \"$@\"; }"]
    lines: list[str] = []
    api_started = moved = False
    for block in blocks():
        if block.lang == "csv":
            name = re.search(r"\(`([\w.-]+)`\):\s*$", block.before)
            assert name, f"README.md:{block.line}: a csv block says which file it is: (`NAME`):"
            (work / name.group(1)).write_text(block.text + "\n")
            continue
        if not runs(block):
            continue
        text = block.text.replace(DATA_DIR, str(data)).replace(f":{PORT}", f":{port}")
        if not api_started and f"127.0.0.1:{port}" in text:
            api = API.replace(PORT, str(port))
            parts += [f"{api} > {shlex.quote(str(work / 'api.log'))} 2>&1 &", "API_PID=$!",
                      "trap 'kill $API_PID 2>/dev/null; wait $API_PID 2>/dev/null || true' EXIT",
                      f"for i in $(seq 600); do command curl -s -o /dev/null http://127.0.0.1:{port}/health "
                      "&& break; sleep 0.5; done"]
            api_started = True
        for ln in commands(Block(block.lang, text, block.line, "")):
            parts += [f"echo '@@@ {len(lines)}'", ln]
            lines.append(ln)
            if not moved and ln.startswith("export PATH="):
                parts.append(f"cd {shlex.quote(str(work))}")  # from here on: another folder
                moved = True
    assert moved and api_started
    return "\n".join(parts) + "\n", lines


def outputs(printed: str, lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for chunk in printed.split("@@@ ")[1:]:
        n, _, text = chunk.partition("\n")
        out[lines[int(n)]] = text
    return out


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def line_of(out: dict[str, str], start: str) -> str:
    """The output of the one command line that starts with `start`."""
    found = [text for cmd, text in out.items() if cmd.startswith(start)]
    assert len(found) == 1, (start, list(out))
    return found[0]


def test_the_readme_runs_as_written(tmp_path: Path) -> None:
    work, data = tmp_path / "elsewhere", tmp_path / "demo-week"
    work.mkdir()
    port = free_port()
    text, lines = script(work, data, port)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MEASUREDB_DATA_DIR")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if Path(p).resolve() != Path(sys.executable).parent.resolve())
    done = subprocess.run(["bash", "-c", text], cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    api_log = (work / "api.log").read_text() if (work / "api.log").exists() else ""
    assert done.returncode == 0, f"{done.stdout[-6000:]}\n{done.stderr[-4000:]}\n{api_log[-2000:]}"
    assert "Traceback" not in done.stdout + done.stderr + api_log
    out = outputs(done.stdout, lines)
    assert set(out) == set(lines)  # every command ran

    # the figures "The demo" quotes for these commands
    assert "\\DEMO: 7.0 days simulated" in done.stdout + done.stderr
    busy = [ln for ln in line_of(out, "measuredb report busy-process").splitlines() if ln.startswith("$")]
    assert busy[0].split()[:2] == ["$APPL.REPORTS.STMTRPT", "$REPT"]  # first, at the wrong priority
    assert busy[0].split()[3:] == [".76", ".00", "190"]  # 0.757 CPU utilisation (10,894 of 14,400 s)
    forecast = {tuple(ln.split()[:2]): ln.split() for ln in line_of(out, "measuredb report capacity-forecast")
                .splitlines() if ln.startswith(("cpu ", "disc "))}
    assert forecast["cpu", "1"][4:6] == ["2.00", "2026-11-19"]  # +2.0 points a day, crossing 70 % on 11-19
    assert forecast["cpu", "0"][5] == "2026-11-23" and forecast["disc", "$DATA2"][5] == "2026-11-21"
    trend = rows(line_of(out, "measuredb report cpu-trend"))
    assert {r["day"]: r["cpu"] for r in trend}["2026-11-18"] == "2"  # the report job on Wednesday
    hours = rows(line_of(out, "measuredb export --system '\\DEMO' --entity cpu --tier hour --from 2026-11-18"))
    assert len(hours) == 4 * 24 and min(r["hour_at"] for r in hours).startswith("2026-11-17T23:00")
    assert "ADD" in line_of(out, 'meascom -c "HELP ADD"')

    # the API on the same database
    health = json.loads(line_of(out, "curl -s http://127.0.0.1"))
    assert health["database"] is True and health["collector_mode"] == "stopped"
    tier = json.loads(line_of(out, 'curl -s "http://127.0.0.1:' + f'{port}/tiers/'))["items"]
    assert [x["bucket"]["hour_at"] for x in tier][:1] == ["2026-11-17T23:00:00Z"] and len(tier) == 24
    assert {x["subject"]["cpu"] for x in tier} == {2}
    breaks = rows(line_of(out, 'curl -s "http://127.0.0.1:' + f'{port}/reports/threshold'))
    assert 7 <= len(breaks) <= 16 and all("07:00" <= r["time_of_day"] <= "17:00" for r in breaks)
    assert all(r["broken"] and "[" not in r["broken"] for r in breaks)
    measurements = json.loads(line_of(out, 'curl -s -H "Authorization: Bearer $TOKEN" http'))["items"]
    assert [m["name"] for m in measurements] == ["DEFAULT"]

    # automatic analysis (docs/analysis.md): the verdict of Wednesday and Friday, no baseline yet
    verdict = line_of(out, "measuredb report health-verdict")
    assert "SCORE:      25/100, 6 of 10 indicators show a problem" in verdict
    yes = {ln.split()[0] for ln in verdict.splitlines() if ln.split()[1:2] == ["YES"]}
    assert yes == {"cpu_over_utilised", "cpu_queuing", "cpu_load_balance", "disc_over_utilised", "disc_queuing",
                   "busy_high_priority_process"}
    assert "CPU 2: 92.7 % busy at 10:00" in verdict and "CPU 2: 13.1 queue length" in verdict
    assert "$REPT (priority 190): 76.1 % of CPU" in verdict
    assert "NO EXCEPTIONS: no hour has a baseline yet (168 hour(s) stored, none judged)" in line_of(
        out, "measuredb report exceptions")
    friday = rows(line_of(out, 'curl -s -H "Authorization: Bearer $TOKEN" "http'))
    assert {r["score"] for r in friday} == {"35"} and len(friday) == 10

    # bring your own data
    first, again = [text for cmd, text in out.items() if cmd.startswith("measuredb import cpu.csv")] or ["", ""]
    assert "3 CPU interval records: 3 stored" in first and "2 hours written, 2 condensed into every tier" in first
    assert "0 stored, 3 already stored" in again
    assert (work / "out" / "configuration.json").exists()
    assert "already stored" in line_of(out, "measuredb import out/") and "0 stored" in line_of(
        out, "measuredb import out/")


def test_every_command_the_readme_names_exists_with_its_options() -> None:
    """The commands the README names in its text and tables (`measuredb retention show | set
    CLASS DURATION | run [--dry-run] | log`, `measuredb export [--system S] …`): every
    subcommand exists and every option is one it takes."""
    root = typer.main.get_command(app)
    text = README.read_text()
    spans = re.findall(r"`(measuredb [^`]+)`", text)
    assert len(spans) > 20
    for span in spans:
        alternatives = [a.split() for a in re.split(r"\s\\?\|\s", span.replace("\n", " "))]
        group = root
        for n, words in enumerate(alternatives):
            cmd = root if n == 0 else group
            if n > 0:
                assert words and words[0].split("|")[0] in (getattr(group, "commands", {}) or {}), (
                    f"README: `{span}`: {group.name} has no command {words[0] if words else ''!r}")
            for word in words[1:] if n == 0 else words:
                if word.startswith(("[", "-", "'", "\\")) or not re.fullmatch(r"[a-z][a-z|-]*", word):
                    break
                names = word.split("|")
                subs = getattr(cmd, "commands", {}) or {}
                if not all(name in subs for name in names):
                    break
                group, cmd = cmd, subs[names[0]]
                for name in names[1:]:
                    assert name in subs, (span, name)
            taken = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
            for option in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", " ".join(words)):
                assert option in taken, f"README: `{span}`: {cmd.name} takes no {option}"
