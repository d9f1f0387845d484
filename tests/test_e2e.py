"""End to end: the real collector (simulated \\DEMO node, live) answering the REST API.

A measurement created over HTTP is picked up by the collector, user counters bumped over HTTP
reach its counter records, active reads and MEASSTATUS come from the running MEASMON, and the
copies it writes are read back with MEASREAD — every hop real, nothing faked."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import ApiSettings
from collector.service import Collector
from collector.settings import CollectorSettings
from core import schema
from core.times import now_us
from tests.engine import MODE
from tests.tokens import create_token

MINUTE = 60_000_000


class Live(threading.Thread):
    """The collector's live loop, sped up for a test: advance to now, control plane, requests."""

    def __init__(self, collector: Collector) -> None:
        super().__init__(daemon=True)
        self.c = collector
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.c.advance(now_us())
                self.c.poll_control()
                self.c.handle_requests()
                self.c.heartbeat()
                time.sleep(0.05)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


@pytest.fixture(scope="module")
def platform(fresh_database, tmp_path_factory) -> Iterator[tuple[str, Collector, TestClient, dict]]:
    url = fresh_database("_e2e")
    schema.apply(url, mode=MODE)
    tmp = tmp_path_factory.mktemp("e2e")
    c = Collector(CollectorSettings(node="demo", seed=11, interval_seconds=60, heartbeat_seconds=0.2,
                                    data_dir=tmp, spool_dir=tmp / "spool"), url)
    c.register(epoch_us=(now_us() - 3 * MINUTE) // MINUTE * MINUTE)
    c.build()
    c.backfill(now_us())
    c.mode = "live"  # as Collector.live does: its heartbeat says so (the backfill's said "backfill")
    c.heartbeat(force=True)
    live = Live(c)
    live.start()
    headers = {"Authorization": f"Bearer {create_token(url, 'e2e', 'write')}"}
    with TestClient(create_app(ApiSettings(control_timeout_seconds=5), database_url=url)) as client:
        yield url, c, client, headers
    live.stop.set()
    live.join(10)
    c.close()
    assert live.error is None, live.error


def wait_for(predicate, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail("timed out")


def test_health_sees_the_live_collector(platform) -> None:
    _, _, client, _ = platform
    body = client.get("/health").json()
    assert body["status"] == "ok" and body["collector_alive"]


def test_active_read_and_status_of_the_default_measurement(platform) -> None:
    _, c, client, headers = platform
    anonymous = client.get("/active/cpu", params={"measurement_id": 1})
    assert anonymous.status_code == 401       # a read through the collector bus needs a token
    r = client.get("/active/cpu", params={"measurement_id": 1, "counters": ["cpu_busy_time", "dispatches"]},
                   headers=headers)
    assert r.status_code == 200, r.text
    records = r.json()["records"]
    assert len(records) == c.topology.n_cpus
    assert all(0 <= rec["values"]["cpu_busy_time"] <= 100 for rec in records)
    assert any(rec["values"]["dispatches"] > 0 for rec in records)
    st = client.get("/measurements/1/status", headers=headers)
    assert st.status_code == 200, st.text
    assert st.json()["collector"]["status"]["entities"]["cpu"] == c.topology.n_cpus


def test_measurement_over_http_with_external_user_counters(platform) -> None:
    url, c, client, headers = platform
    contab = {"descriptors": [{"type": "USERDEF", "fields": {"program_file_name": "$PROGS.EXTERN.APP"}}],
              "counters": [{"name": "RESP-TIME", "process": "$PROGS.EXTERN.APP", "type": "QUEUE"},
                           {"name": "THROUGHPUT", "process": "$PROGS.EXTERN.APP", "type": "ACCUM"}]}
    r = client.post("/measurements", json={"name": "EXTERN", "contab": contab, "start": True,
                                           "interval_seconds": 60}, headers=headers)
    assert r.status_code == 201, r.text
    mid = r.json()["measurement_id"]
    wait_for(lambda: client.get(f"/measurements/{mid}").json()["state"] == "running")
    ref = {"cpu": 1, "pin": 300, "process_name": "$EXT1", "program_file_name": "$PROGS.EXTERN.APP"}
    init = client.post("/usercounters/bump-init", json={**ref, "name": "THROUGHPUT"}, headers=headers)
    assert init.status_code == 200, init.text
    offset = init.json()["offset"]
    assert offset >= 0
    for _ in range(5):
        b = client.post("/usercounters/bump", json={**ref, "name": "THROUGHPUT", "offset": offset,
                                                    "op": "ADD", "value": 2}, headers=headers)
        assert b.json() == {"bumped": True}
    resp = client.post("/usercounters/bump-init", json={**ref, "name": "RESP-TIME"}, headers=headers).json()
    assert resp["offset"] >= 0
    for op in ("INCQUEUE", "INCQUEUE"):
        client.post("/usercounters/bump", json={**ref, "name": "RESP-TIME", "op": op}, headers=headers)
    time.sleep(0.3)
    client.post("/usercounters/bump", json={**ref, "name": "RESP-TIME", "op": "DEQUEUE"}, headers=headers)
    other = client.post("/usercounters/bump-init", json={**ref, "name": "UNMEASURED"}, headers=headers)
    assert other.json()["offset"] == -1
    active = client.get("/active/userdef", params={"measurement_id": mid, "rate": "false",
                                                   "counters": "time_value"}, headers=headers).json()["records"]
    by_name = {rec["ids"]["name"]: rec["values"]["time_value"] for rec in active}
    assert by_name["THROUGHPUT"] == 10
    assert by_name["RESP-TIME"] >= 2 * 200_000     # ≥ 2 queued for ≥ 0.2 s (µs × length)
    stop = client.post(f"/measurements/{mid}/stop", json={}, headers=headers)
    assert stop.status_code == 200, stop.text
    wait_for(lambda: client.get(f"/measurements/{mid}").json()["state"] == "stopped")
    # the stop copy is stored: MEASREAD of the stored interval records sums to the bumps
    read = client.get(f"/measurements/{mid}/counters/userdef", params={"rate": "false", "counters": "time_value"})
    assert read.status_code == 200, read.text
    stored = {rec["ids"]["name"]: rec["values"]["time_value"] for rec in read.json()["records"]}
    assert stored["THROUGHPUT"] == 10
    with psycopg.connect(url) as conn:
        usage = conn.execute("SELECT usage FROM _measure.measurement WHERE measurement_id = %s", (mid,)).fetchone()[0]
    assert usage["entities"]["userdef"]["records"] == 2


def test_stored_counter_reads_of_the_default_measurement(platform) -> None:
    _, c, client, _ = platform
    r = client.get("/measurements/1/counters/cpu", params={"counters": "cpu_busy_time"})
    assert r.status_code == 200, r.text
    assert len(r.json()["records"]) == c.topology.n_cpus
