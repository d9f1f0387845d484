"""GET /health, /docs and /openapi.json."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import ApiSettings
from core.schema import load_plan
from tests.engine import TIMESCALEDB


@pytest.fixture
def client(db_url: str):
    with TestClient(create_app(ApiSettings(), database_url=db_url)) as c:
        yield c


def test_health_without_collector_is_degraded(client: TestClient, db_url: str) -> None:
    with psycopg.connect(db_url) as c:
        c.execute("DELETE FROM _measure.collector_heartbeat")
    body = client.get("/health").json()
    assert body["status"] == "degraded"
    assert body["database"] is True
    assert body["schema_version"] == load_plan().code_version == body["code_schema_version"]
    assert body["timescaledb"] is TIMESCALEDB
    assert body["collector_alive"] is False
    assert body["detail"] == "no collector has started yet (run `measuredb collector`, or `make run`)"


@pytest.mark.parametrize(("mode", "age_s", "detail", "status", "alive"), [
    ("starting", 200, {}, "starting", True),          # building the node: quiet for minutes
    ("backfill", 90, {"backfill_done": 0.42}, "starting", True),
    ("backfill", 90, {"backfill_done": 0.42, "backfill_left_s": 118}, "starting", True),
    ("backfill", 900, {"backfill_done": 0.42}, "degraded", False),
    ("live", 90, {}, "degraded", False),
    ("live", 5, {}, "ok", True),
    ("stopped", 5, {}, "degraded", False),          # its last beat: a backfill ended, Ctrl-C
])
def test_health_tells_a_starting_collector_from_a_silent_one(client, db_url, mode, age_s, detail, status,
                                                             alive) -> None:
    from datetime import timedelta

    from psycopg.types.json import Jsonb

    beat = datetime.now(UTC) - timedelta(seconds=age_s)
    with psycopg.connect(db_url) as c:
        c.execute("DELETE FROM _measure.collector_heartbeat")
        c.execute("INSERT INTO _measure.collector_heartbeat (collector_id, node, started_at, beat_at, mode, detail) "
                  "VALUES ('test', 'demo', %s, %s, %s, %s)", (beat, beat, mode, Jsonb(detail)))
    try:
        body = client.get("/health").json()
        assert (body["status"], body["collector_alive"], body["collector_mode"]) == (status, alive, mode)
        if mode == "backfill" and status == "starting":
            left = ", about 118 s left" if "backfill_left_s" in detail else ""
            assert body["detail"] == (f"the collector is backfilling its history (42 % done{left}); live "
                                      "collection follows")
        if status == "degraded" and mode != "stopped":
            assert body["detail"] == "no collector heartbeat within 60 s"
        if mode == "stopped":
            assert body["detail"] == (f"the collector stopped at {beat:%Y-%m-%d %H:%M:%S} UTC (run "
                                      "`measuredb collector`, or `make run`)")
    finally:
        with psycopg.connect(db_url) as c:
            c.execute("DELETE FROM _measure.collector_heartbeat WHERE collector_id = 'test'")


def test_health_with_fresh_heartbeat_is_ok(client: TestClient, db_url: str) -> None:
    now = datetime.now(UTC)
    with psycopg.connect(db_url) as c:
        c.execute(
            "INSERT INTO _measure.collector_heartbeat (collector_id, node, started_at, beat_at, mode) "
            "VALUES ('test', 'demo', %s, %s, 'live') ON CONFLICT (collector_id) DO UPDATE SET beat_at = excluded.beat_at",
            (now, now),
        )
    try:
        response = client.get("/health")
        assert response.status_code == 200
        assert response.json()["status"] == "ok"
        assert response.json()["collector_alive"] is True
    finally:
        with psycopg.connect(db_url) as c:
            c.execute("DELETE FROM _measure.collector_heartbeat WHERE collector_id = 'test'")


def test_health_says_what_the_collector_misses(client: TestClient, db_url: str) -> None:
    """A host node whose kernel gives no complete CPU queue source says so in its heartbeat;
    /health passes it on while ok."""
    from psycopg.types.json import Jsonb

    note = ("CPU-QTIME and process READY-TIME miss threads that end between two readings (no "
            "/proc/schedstat; taskstats needs CAP_NET_ADMIN): ... about 30 % low")
    now = datetime.now(UTC)
    with psycopg.connect(db_url) as c:
        c.execute("DELETE FROM _measure.collector_heartbeat")
        c.execute("INSERT INTO _measure.collector_heartbeat (collector_id, node, started_at, beat_at, mode, detail) "
                  "VALUES ('test', 'host', %s, %s, 'live', %s)", (now, now, Jsonb({"note": note})))
    try:
        body = client.get("/health").json()
        assert (body["status"], body["detail"]) == ("ok", note)
    finally:
        with psycopg.connect(db_url) as c:
            c.execute("DELETE FROM _measure.collector_heartbeat WHERE collector_id = 'test'")


def test_health_with_database_down_is_503() -> None:
    app = create_app(ApiSettings(), database_url="postgresql://nobody@127.0.0.1:1/measuredb")
    with TestClient(app) as c:
        response = c.get("/health")
    assert response.status_code == 503
    assert response.json()["status"] == "down"
    assert response.json()["database"] is False


def test_docs_and_openapi(client: TestClient) -> None:
    assert client.get("/docs").status_code == 200
    spec = client.get("/openapi.json").json()
    assert "/health" in spec["paths"]


def test_api_runs_as_the_api_role(client: TestClient) -> None:
    engine = client.app.state.engine
    with engine.connect() as c:
        assert c.exec_driver_sql("SELECT current_user").scalar() == "measure_api"


def test_oversized_body_is_413(client: TestClient) -> None:
    response = client.post("/health", content=b"x" * (2 * 1024 * 1024))
    assert response.status_code == 413
    assert response.json()["error"] == "PayloadTooLarge"
