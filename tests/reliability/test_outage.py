"""A database that stops, starts and comes back under load: every request to the API is
answered (200, or 503 with the usual body) within a bounded time, none hangs, no socket is
left behind, and the API serves again once the database is back."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

from core import schema
from core.database import start_embedded
from tests.engine import MODE, TIMESCALEDB

PATHS = ["/health", "/catalog/entities", "/tiers/cpu/hour", "/measurements", "/reports/runs", "/measurements/1"]
ANSWER_WITHIN_S = 10.0


def ask(base: str, path: str) -> tuple[object, float]:
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(base + path, timeout=ANSWER_WITHIN_S + 5) as r:
            r.read()
            return r.status, time.monotonic() - t0
    except urllib.error.HTTPError as exc:
        body = json.loads(exc.read() or b"{}")
        return (exc.code, body.get("error") or body.get("status")), time.monotonic() - t0
    except OSError as exc:  # a timeout or a reset: what must not happen
        return f"{type(exc).__name__}: {exc}", time.monotonic() - t0


def test_every_request_is_answered_while_the_database_stops_starts_and_comes_back(start_api, tmp_path: Path):
    server = start_embedded(tmp_path / "pg", dbname="measuredb", timescaledb=TIMESCALEDB)
    try:
        url = server.url()
        schema.apply(url, mode=MODE)
        api = start_api(url)
        phase = ["up"]
        answers: list[tuple[str, str, object, float]] = []
        stop = threading.Event()

        def client(i: int) -> None:
            n = i
            while not stop.is_set():
                path = PATHS[n % len(PATHS)]
                status, took = ask(api.base, path)
                answers.append((phase[0], path, status, took))
                n += 1

        clients = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in clients:
            t.start()
        time.sleep(2)
        phase[0] = "stopping"
        server.stop()
        phase[0] = "down"
        time.sleep(6)
        phase[0] = "starting"
        server = start_embedded(tmp_path / "pg", dbname="measuredb", timescaledb=TIMESCALEDB)
        phase[0] = "back"
        time.sleep(6)
        stop.set()
        for t in clients:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in clients), "a request hung"
        bad = [a for a in answers if not isinstance(a[2], int | tuple)]
        assert not bad, bad[:5]
        slow = [a for a in answers if a[3] > ANSWER_WITHIN_S]
        assert not slow, slow[:5]
        for ph, path, status, _ in answers:
            code = status if isinstance(status, int) else status[0]
            assert code in (200, 404, 503), (ph, path, status)
            if code == 503 and path != "/health":
                assert status[1] == "Unavailable", (ph, path, status)
        assert {a[0] for a in answers if a[2] == 200 and a[1] == "/health"} >= {"up", "back"}
        down = [a for a in answers if a[0] == "down"]
        assert down and all(a[2] != 200 or a[1] == "/catalog/entities" for a in down), down[:5]
        assert [a for a in answers if a[0] == "back"][-1][2] in (200, (404, "NotFound"))
        time.sleep(1)
        waiting = [c for c in psutil.Process(api.proc.pid).net_connections(kind="tcp")
                   if c.status == psutil.CONN_CLOSE_WAIT]
        assert not waiting, waiting
    finally:
        server.stop()
