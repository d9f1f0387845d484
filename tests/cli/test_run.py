"""`measuredb run` (what `make run` starts): the platform comes up on an embedded PostgreSQL,
answers GET /health, stops cleanly on Ctrl-C, and a second start reuses the data."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psycopg
import pytest

from tests.engine import TIMESCALEDB


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(data: Path, port: int, *, by_setting: bool = False) -> subprocess.Popen:
    """`measuredb run` on `port`: by --api-port, or by MEASUREDB_API_PORT as the README's
    Settings table says (`MEASUREDB_API_PORT=8100 make run`)."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(MEASUREDB_DATA_DIR=str(data), MEASUREDB_COLLECTOR_BACKFILL_DAYS="0",
               MEASUREDB_COLLECTOR_HEARTBEAT_SECONDS="1")
    if by_setting:
        env["MEASUREDB_API_PORT"] = str(port)
    return subprocess.Popen([sys.executable, "-m", "cli", "run", *([] if by_setting else ["--api-port", str(port)])],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 300) -> dict:
    """/health once it says ok: the collector is live (while it registers and builds its node,
    which takes numba a minute or more on a slow machine, it says starting)."""
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the platform exited"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                body = json.loads(r.read())
                if r.status == 200 and body["status"] == "ok" and body["collector_alive"]:
                    return body
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"no healthy platform within {timeout} s: {body}")


class Output(threading.Thread):
    """Collects the platform's output while it runs."""

    def __init__(self, proc: subprocess.Popen) -> None:
        super().__init__(daemon=True)
        self.proc, self.lines = proc, []
        self.start()

    def run(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            assert time.monotonic() < deadline, "".join(self.lines)
            time.sleep(0.1)


def ctrl_c(proc: subprocess.Popen, output: Output) -> str:
    os.killpg(proc.pid, signal.SIGINT)   # what a terminal's Ctrl-C does: the whole group
    proc.wait(timeout=60)
    output.join(10)
    out = "".join(output.lines)
    assert proc.returncode == 0, out
    return out


def test_run_health_ctrl_c_and_warm_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    proc = start(data, port)
    output = Output(proc)
    body = wait_healthy(port, proc)
    assert body["status"] == "ok" and body["database"] and body["timescaledb"] is TIMESCALEDB
    output.wait_for("measuredb is running")
    out = ctrl_c(proc, output)
    assert "measuredb is running" in out and f"http://127.0.0.1:{port}/docs" in out
    assert "collector INFO live collection began: node time" in out
    assert "measuredb stopped." in out
    pgdata = data / "pg"
    assert not (pgdata / "postmaster.pid").exists()        # the embedded server stopped
    # warm start: same data, no second default measurement; the port from the setting
    port = free_port()
    proc = start(data, port, by_setting=True)
    output = Output(proc)
    wait_healthy(port, proc)
    output.wait_for("measuredb is running")
    out = ctrl_c(proc, output)
    assert "measuredb stopped." in out and f"API            http://127.0.0.1:{port}" in out
    from core.database import start_embedded

    server = start_embedded(data)
    try:
        with psycopg.connect(server.url()) as c:
            assert c.execute("SELECT count(*) FROM _measure.measurement").fetchone()[0] == 1
            assert c.execute("SELECT count(*) FROM measure.counter_copy").fetchone()[0] > 0
    finally:
        server.stop()
