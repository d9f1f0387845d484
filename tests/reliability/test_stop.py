"""SIGINT or SIGTERM stops `measuredb collector` within 15 s whatever it is doing: backfilling,
live, or waiting out a database outage; what it measured until then is stored or spooled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from core import schema
from core.database import start_embedded
from tests.engine import MODE, TIMESCALEDB

REPO = Path(__file__).resolve().parents[2]
STOP_WITHIN_S = 15.0


def start_collector(url: str, tmp: Path, **settings: str) -> tuple[subprocess.Popen, Path]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEASUREDB_")}
    env.update(DATABASE_URL=url, MEASUREDB_DATA_DIR=str(tmp / "data"), PYTHONPATH=str(REPO),
               MEASUREDB_COLLECTOR_PROGRESS="lines", MEASUREDB_COLLECTOR_HEARTBEAT_SECONDS="1", **settings)
    log = tmp / "collector.log"
    proc = subprocess.Popen([sys.executable, "-m", "cli", "collector"], cwd=REPO, env=env,
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)
    return proc, log


def wait_for(what, proc: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        if what():
            return
        time.sleep(0.5)
    pytest.fail(f"not reached within {timeout} s: {log.read_text()[-3000:]}")


def mode(url: str) -> str | None:
    try:
        with psycopg.connect(url, connect_timeout=2) as c:
            row = c.execute("SELECT collector_mode FROM measure.schema_info()").fetchone()
    except psycopg.OperationalError:
        return None
    return row[0] if row else None


def stop(proc: subprocess.Popen, sig: int, log: Path) -> float:
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running 60 s after {signal.Signals(sig).name}: {log.read_text()[-3000:]}")
    took = time.monotonic() - t0
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
    return took


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_backfilling_collector_stops_at_once(fresh_database, tmp_path: Path, sig: int) -> None:
    url = fresh_database(f"_stop_backfill_{sig}")
    schema.apply(url, mode=MODE)
    proc, log = start_collector(url, tmp_path, MEASUREDB_COLLECTOR_BACKFILL_DAYS="3")
    wait_for(lambda: mode(url) == "backfill" and "backfill:" in log.read_text(), proc, log)
    assert stop(proc, sig, log) <= STOP_WITHIN_S
    assert "stopping: copies up to" in log.read_text()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_live_collector_stops_at_once(fresh_database, tmp_path: Path, sig: int) -> None:
    url = fresh_database(f"_stop_live_{sig}")
    schema.apply(url, mode=MODE)
    proc, log = start_collector(url, tmp_path, MEASUREDB_COLLECTOR_BACKFILL_DAYS="0")
    wait_for(lambda: mode(url) == "live" and "live collection began" in log.read_text(), proc, log)
    assert stop(proc, sig, log) <= STOP_WITHIN_S


def test_a_collector_waiting_out_an_outage_stops_at_once(tmp_path: Path) -> None:
    server = start_embedded(tmp_path / "pg", dbname="measuredb", timescaledb=TIMESCALEDB)
    try:
        url = server.url()
        schema.apply(url, mode=MODE)
        proc, log = start_collector(url, tmp_path, MEASUREDB_COLLECTOR_BACKFILL_DAYS="0")
        wait_for(lambda: mode(url) == "live", proc, log)
        server.stop()
        wait_for(lambda: "unreachable" in log.read_text(), proc, log, timeout=120)
        time.sleep(2)  # well into its backoff
        assert stop(proc, signal.SIGINT, log) <= STOP_WITHIN_S
    finally:
        server.stop()
