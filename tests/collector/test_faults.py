"""Faults a running collector meets, against real servers: PostgreSQL stopped and started
during live collection, kill -9 at random points, a slow node that cannot keep up; plus
live pacing against the wall clock and control answered during a backfill. Each run is
compared with the uninterrupted reference run of the same seed (tests/collector/
test_service.py): nothing lost, nothing duplicated, and the watermark never goes back."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest

from collector.service import ON_TIME_US, Collector
from core import schema
from core.database import start_embedded
from core.times import now_us, to_ts
from tests.collector.test_service import EPOCH, MINUTE, reference_run, settings, snapshot
from tests.engine import MODE, TIMESCALEDB

pytestmark = pytest.mark.reliability  # the reliability suite (pytest -m reliability)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def reference(fresh_database, tmp_path_factory) -> tuple:
    return reference_run(fresh_database, tmp_path_factory)


def watermark(url: str) -> int | None:
    """The durable watermark; None while the database is away or before the collector has
    registered (a kill may land before its first commit)."""
    try:
        with psycopg.connect(url, connect_timeout=1) as c:
            row = c.execute("SELECT _measure.timestamptz_to_us(durable_until) FROM _measure.collector_state"
                            ).fetchone()
    except psycopg.OperationalError:
        return None
    return None if row is None else row[0]


def wait_until(cond, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_live_collection_waits_out_a_database_outage(reference, tmp_path: Path) -> None:
    server = start_embedded(tmp_path / "pg", dbname="measuredb", timescaledb=TIMESCALEDB)
    url = server.url()
    marks: list[int] = []
    try:
        schema.apply(url, mode=MODE)
        c = Collector(settings(tmp_path).model_copy(update={"speed": 120.0, "heartbeat_seconds": 0.2}), url)
        c.register(epoch_us=EPOCH)
        c.build()
        c.writer.backoff_max_s = 2.0                   # retried at least every 2 s once it is down
        errors: list[BaseException] = []

        def live() -> None:
            try:
                c.live(stop_at_us=EPOCH + 30 * MINUTE, stop_after_s=120)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        thread = threading.Thread(target=live)
        thread.start()

        def mark() -> int:
            w = watermark(c.url)
            if w is not None:
                marks.append(w)
            return w or 0

        wait_until(lambda: mark() >= EPOCH + 6 * MINUTE)
        server.stop()                                   # PostgreSQL goes away during live collection …
        wait_until(lambda: c.node.now_us >= EPOCH + 14 * MINUTE)
        assert c.writer.spooled() and thread.is_alive()  # … measuring goes on into the spool
        server = start_embedded(tmp_path / "pg", dbname="measuredb", timescaledb=TIMESCALEDB)
        c.url = c.writer.url = url = server.url()        # … and it comes back
        while thread.is_alive():
            mark()
            time.sleep(0.1)
        assert not errors, errors
        assert c.node.now_us == EPOCH + 30 * MINUTE
        assert c.writer.spooled() == []                 # replayed by live collection itself
        c.close()
        mark()
        assert marks == sorted(marks) and marks[-1] == EPOCH + 30 * MINUTE
        assert snapshot(url) == reference               # nothing lost, nothing twice
    finally:
        server.stop()


KILLED_RUN = """
import sys
from pathlib import Path
from collector.settings import CollectorSettings
from collector.service import Collector

url, tmp, epoch, until = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
c = Collector(CollectorSettings(node="demo", seed=7, interval_seconds=60, backfill_days=0,
                                data_dir=tmp, spool_dir=tmp / "spool"), url)
c.register(epoch_us=epoch)
c.build()
for t in range(epoch + 60_000_000, until + 1, 60_000_000):
    c.backfill(t, chunk_us=60_000_000)
    if t % (7 * 60_000_000) == 0:
        c.checkpoint()
c.close()
print("done")
"""
# one backfill: slices written by the writer's thread while the next are simulated, hours
# condensed every 7 minutes (several slices at once) and checkpoint files written as often
KILLED_BACKFILL = KILLED_RUN.replace("""for t in range(epoch + 60_000_000, until + 1, 60_000_000):
    c.backfill(t, chunk_us=60_000_000)
    if t % (7 * 60_000_000) == 0:
        c.checkpoint()
""", """from collector import service
service.CHECKPOINT_EVERY_US = service.CONDENSE_EVERY_US = 7 * 60_000_000
c.backfill(until, chunk_us=60_000_000)
""")


def killed_after_progress(proc: subprocess.Popen, url: str, after: int, delay_s: float) -> bool:
    """SIGKILL proc delay_s after the watermark passed `after` (no handler, no flush); False
    when it ended first."""
    deadline = time.monotonic() + 600
    while proc.poll() is None and (watermark(url) or 0) <= after:
        if time.monotonic() > deadline:
            proc.kill()
            proc.communicate()
            pytest.fail("the collector stored nothing in 10 minutes")
        time.sleep(0.01)
    time.sleep(delay_s)
    if proc.poll() is not None:
        return False
    proc.kill()
    proc.communicate()
    return True


@pytest.mark.parametrize("script", [KILLED_RUN, KILLED_BACKFILL], ids=["backfills", "one-backfill"])
def test_kill_9_at_random_points_loses_and_duplicates_nothing(reference, fresh_database, tmp_path: Path,
                                                               script: str) -> None:
    url = fresh_database("_svc_kill" + ("" if script is KILLED_RUN else "_one"))
    schema.apply(url, mode=MODE)
    rng = np.random.default_rng(20261125)
    args = [sys.executable, "-c", script, url, str(tmp_path), str(EPOCH), str(EPOCH + 30 * MINUTE)]
    marks, kills = [], 0
    # killed up to 8 times, each a random 0-100 ms after the run stored its next slice (so that
    # every kill lands mid-run however fast the machine: COPY, condensing, a checkpoint file),
    # then run to its end without a kill
    for i in range(9):
        proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if i < 8 and killed_after_progress(proc, url, watermark(url) or 0, float(rng.uniform(0.0, 0.1))):
            kills += 1
            marks.append(watermark(url) or 0)
            continue
        try:
            out, _err = proc.communicate(timeout=600.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail("the collector did not finish in 10 minutes after its kills")
        assert proc.returncode == 0 and b"done" in out, _err.decode()[-2000:]
        break
    assert kills >= 2, "the seed should kill it at least twice"
    assert marks == sorted(marks)
    assert watermark(url) == EPOCH + 30 * MINUTE
    assert snapshot(url) == reference
    with psycopg.connect(url) as c:                     # hours a killed run left marked: condensed since
        assert c.execute("SELECT count(*) FROM _measure.tier_dirty").fetchone() == (0,)


def test_live_catches_up_with_the_wall_clock(fresh_database, tmp_path: Path, caplog) -> None:
    """After a backfill (or an outage) the node's clock follows the wall clock again, within
    ON_TIME_US, instead of staying as far behind as the backfill took."""
    url = fresh_database("_svc_pace")
    schema.apply(url, mode=MODE)
    start = now_us() - 25 * MINUTE
    start -= start % MINUTE
    c = Collector(settings(tmp_path), url)
    c.register(epoch_us=start)
    c.build()
    caplog.set_level(logging.INFO, logger="collector.service")
    c.live(stop_after_s=4)
    c.close()
    assert c.lag_us <= ON_TIME_US
    assert now_us() - c.node.now_us < MINUTE + 5_000_000
    assert "catching up: 25 min" in caplog.text or "catching up: 24 min" in caplog.text
    assert "caught up with real time" in caplog.text


def test_live_says_when_it_cannot_keep_up(fresh_database, tmp_path: Path, caplog, monkeypatch) -> None:
    url = fresh_database("_svc_slow")
    schema.apply(url, mode=MODE)
    c = Collector(settings(tmp_path).model_copy(update={"speed": 6000.0}), url)   # 100 min a second
    c.register(epoch_us=EPOCH)
    c.build()
    slow = c.measmon.run_until
    monkeypatch.setattr(c.measmon, "run_until", lambda t: (time.sleep(0.3), slow(t)))
    monkeypatch.setattr("collector.service.BEHIND_WARNING_S", 1.0)
    c.live(stop_after_s=4)
    c.close()
    assert c.lag_us > 60 * MINUTE
    assert "behind real time and has been behind for" in caplog.text


def test_control_is_answered_during_a_backfill(fresh_database, tmp_path: Path) -> None:
    url = fresh_database("_svc_ctl")
    schema.apply(url, mode=MODE)
    c = Collector(settings(tmp_path), url)
    c.register(epoch_us=EPOCH)
    c.build()
    with psycopg.connect(url, autocommit=True) as conn:
        mid = conn.execute("SELECT measurement_id FROM _measure.measurement").fetchone()[0]
        rid = conn.execute("SELECT measure.submit_request(%s::smallint, 'status', %s::jsonb)",
                           (c.state.system_id, json.dumps({"measurement_id": mid}))).fetchone()[0]
        bad = conn.execute("SELECT measure.submit_request(%s::smallint, 'bump', '{}'::jsonb)",
                           (c.state.system_id,)).fetchone()[0]
    c.backfill(EPOCH + 30 * MINUTE, chunk_us=5 * MINUTE, serve_control=True)
    c.close()
    with psycopg.connect(url) as conn:
        answers = {r[0]: r[1:] for r in conn.execute(
            "SELECT request_id, response->>'at', error_code, error FROM _measure.control_request")}
    assert answers[rid] == (to_ts(EPOCH + 5 * MINUTE).isoformat(), None, None)  # after the first chunk
    at, code, error = answers[bad]
    assert (at, code) == (None, "invalid")
    assert error.startswith("the request lacks or mistypes a field (ids: Field required; op: Field required)")


def test_backfill_progress_as_log_lines(fresh_database, tmp_path: Path, caplog, monkeypatch) -> None:
    """What `measuredb run` shows while a first start backfills (MEASUREDB_COLLECTOR_PROGRESS=lines)."""
    url = fresh_database("_svc_lines")
    schema.apply(url, mode=MODE)
    c = Collector(settings(tmp_path), url)
    c.register(epoch_us=EPOCH)
    c.build()
    caplog.set_level(logging.INFO, logger="collector.service")
    monkeypatch.setattr("collector.service.PROGRESS_EVERY_S", 0.0)
    c.backfill(EPOCH + 20 * MINUTE, chunk_us=5 * MINUTE, progress="lines")
    c.close()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "backfill: 2026-01-01 08:00:00 UTC to 2026-01-01 08:20:00 UTC (0.0 days of node time)"
    assert [m.split(" (")[0] for m in lines[1:5]] == ["backfill:  25.0 %", "backfill:  50.0 %",
                                                      "backfill:  75.0 %", "backfill: 100.0 %"]
    assert lines[5].startswith("backfill done: 0.0 days of node time in ")
