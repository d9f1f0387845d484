"""/measurements/{id}/counters/{entity} (MEASREAD), /active/{entity} (MEASREADACTIVE) and the
catalogue endpoints. Read semantics are tested in tests/collector/measure/test_read.py; here:
the HTTP shape, parameters and errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from core.catalog import load_catalog
from core.errors import ErrorKind
from tests.api.fakes import FakeError

T0 = datetime(2024, 5, 1, tzinfo=UTC)
CPU = load_catalog().entity("cpu")


@pytest.fixture(scope="module")
def mid(api_db_url: str, system_id: int) -> int:
    with psycopg.connect(api_db_url) as c:
        m = c.execute("INSERT INTO _measure.measurement (system_id, name, contab, start_at, interval_us, state) "
                      "VALUES (%s, 'CTRREAD', '{\"descriptors\": [{\"type\": \"CPU\"}]}', %s, 60000000, 'stopped') "
                      "RETURNING measurement_id", (system_id, T0)).fetchone()[0]
        for cpu in (0, 1):
            eid = 5000 + cpu
            c.execute("INSERT INTO _measure.entity (entity_id, system_id, type_code, key, ids, cpu, first_seen_at) "
                      "VALUES (%s, %s, 1, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                      (eid, system_id, f"cpu={cpu}", json.dumps({"cpu": cpu}), cpu, T0))
            for k in range(3):
                counters = [0] * len(CPU.counters)
                counters[CPU.index("cpu_busy_time")] = (k + 1 + 3 * cpu) * 6_000_000  # 10 % steps
                counters[CPU.index("dispatches")] = 60 * (k + 1)
                c.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, "
                          "to_at, delta_us, closing_kind, system_id, type_code, cpu, counters) "
                          "VALUES (%s, %s, %s, %s, %s, 60000000, 3, %s, 1, %s, %s)",
                          (m, eid, T0, T0 + timedelta(minutes=k), T0 + timedelta(minutes=k + 1), system_id,
                           cpu, counters))
    return m


def test_latest_read(client, mid):
    r = client.get(f"/measurements/{mid}/counters/cpu", params={"counters": ["CPU-BUSY-TIME", "dispatches"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["mode"] == "latest" and body["rate"] is True
    assert body["counters"] == [
        {"name": "cpu_busy_time", "measure_name": "CPU-BUSY-TIME", "kind": "busy", "unit": "%"},
        {"name": "dispatches", "measure_name": "DISPATCHES", "kind": "incrementing", "unit": "events/s"}]
    assert [(x["entity_key"], x["values"]) for x in body["records"]] == [
        ("cpu=0", {"cpu_busy_time": 30.0, "dispatches": 3.0}),
        ("cpu=1", {"cpu_busy_time": 60.0, "dispatches": 3.0})]
    assert body["records"][0]["delta_seconds"] == 60.0 and body["next_cursor"] is None


def test_summary_by_and_ids(client, mid):
    params = {"from_at": T0.isoformat(), "to_at": (T0 + timedelta(minutes=3)).isoformat(),
              "counters": "cpu_busy_time", "by": "cpu_busy_time", "rate": "false"}
    body = client.get(f"/measurements/{mid}/counters/cpu", params=params).json()
    assert body["mode"] == "summary"
    assert [(x["ids"]["cpu"], x["values"]["cpu_busy_time"], x["intervals"]) for x in body["records"]] == [
        (1, 90_000_000, 3), (0, 36_000_000, 3)]
    body = client.get(f"/measurements/{mid}/counters/cpu", params={**params, "ids": "cpu:0"}).json()
    assert [x["ids"]["cpu"] for x in body["records"]] == [0]


def test_listall_paging_and_if(client, mid):
    params = {"all_records": "true", "limit": 4, "counters": "cpu_busy_time",
              "if_counter": "CPU-BUSY-TIME", "if_op": ">", "if_value": 15}
    first = client.get(f"/measurements/{mid}/counters/cpu", params=params).json()
    assert first["mode"] == "intervals" and len(first["records"]) == 4 and first["next_cursor"]
    rest = client.get(f"/measurements/{mid}/counters/cpu", params={**params, "cursor": first["next_cursor"]}).json()
    assert [x["values"]["cpu_busy_time"] for x in first["records"] + rest["records"]] == [
        40.0, 20.0, 50.0, 30.0, 60.0]
    assert rest["next_cursor"] is None


def test_nearest(client, mid):
    params = {"at": (T0 + timedelta(seconds=125)).isoformat(), "tolerance_seconds": 10, "counters": "dispatches",
              "rate": "false"}
    body = client.get(f"/measurements/{mid}/counters/cpu", params=params).json()
    assert body["mode"] == "nearest"
    assert [(x["to_at"], x["values"]["dispatches"]) for x in body["records"]] == [
        ("2024-05-01T00:02:00Z", 120), ("2024-05-01T00:02:00Z", 120)]


@pytest.mark.parametrize(
    ("path", "params", "status", "field"),
    [
        ("/measurements/999999/counters/cpu", {}, 404, "measurement_id"),
        ("/measurements/{mid}/counters/nope", {}, 422, "entity"),
        ("/measurements/{mid}/counters/cpu", {"counters": "NOPE"}, 404, "counters"),
        ("/measurements/{mid}/counters/cpu", {"ids": "cpu:99"}, 422, "descriptor.cpu"),
        ("/measurements/{mid}/counters/cpu", {"ids": "cpu"}, 422, "ids.0"),
        ("/measurements/{mid}/counters/cpu", {"from_at": "2024-05-02T00:00:00Z", "to_at": "2024-05-01T00:00:00Z"},
         422, "from_at"),
        ("/measurements/{mid}/counters/cpu", {"if_counter": "swaps"}, 422, "if_counter"),
        ("/measurements/{mid}/counters/cpu", {"if_counter": "swaps", "if_op": "!", "if_value": 1}, 422, "if_op"),
        ("/measurements/{mid}/counters/cpu", {"limit": 0}, 422, "limit"),
        ("/measurements/{mid}/counters/cpu", {"cursor": "zz"}, 422, "cursor"),
        ("/measurements/{mid}/counters/cpu", {"from_at": "yesterday"}, 422, "from_at"),
        ("/measurements/{mid}/counters/cpu", {"bogus": "1"}, 422, "bogus"),
    ],
)
def test_read_errors(client, mid, path, params, status, field):
    r = client.get(path.format(mid=mid), params=params)
    assert r.status_code == status, r.text
    assert r.json()["field"] == field


def test_catalogue(client):
    entities = client.get("/catalog/entities").json()
    assert [e["entity"] for e in entities] == list(load_catalog().entities)
    counters = client.get("/catalog/entities/cpu/counters").json()
    assert counters[0] == {"name": "cpu_busy_time", "measure_name": "CPU-BUSY-TIME", "kind": "busy", "unit": "us",
                           "rate_unit": "%", "position": 1, "help": CPU.counter("cpu_busy_time").help}


def test_active_read(client, mid, fake_collector, read_headers):
    at_us = int(T0.timestamp() * 1e6) + 10_000_000
    counters = [0] * len(CPU.counters)
    counters[CPU.index("cpu_busy_time")] = 2_500_000
    counters[CPU.index("transactions")] = 4
    counters[CPU.index("response_time")] = 1_000_000
    names = [c.measure_name for c in CPU.counters]
    iso = lambda us: datetime.fromtimestamp(us / 1e6, UTC).isoformat()
    # the answer exactly as collector/service.py Collector._read_active builds it
    fake_collector.handler = lambda kind, payload: {"entity": "cpu", "at": iso(at_us), "records": [
        {"key": "cpu=1", "ids": {"cpu": 1}, "cpu": 1, "record_at": iso(at_us - 10_000_000),
         "counters": dict(zip(names, counters, strict=True))}]}
    r = client.get("/active/cpu", params={"ids": "cpu:1", "counters": ["cpu_busy_time", "response_time"]}, headers=read_headers)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["mode"] == "active"
    assert body["records"][0]["values"] == {"cpu_busy_time": 25.0, "response_time": 250_000.0}
    assert body["records"][0]["delta_seconds"] == 10.0
    assert fake_collector.seen[-1] == ("read_active", {"entity": "cpu", "descriptor": {"cpu": 1},
                                                       "measurement_id": None})
    r = client.get("/active/cpu", params={"ids": "cpu:1", "rate": "false", "measurement_id": mid,
                                          "counters": "cpu_busy_time"}, headers=read_headers)
    assert r.json()["records"][0]["values"] == {"cpu_busy_time": 2_500_000}
    assert fake_collector.seen[-1][1]["measurement_id"] == mid
    # with the measurement's baseline copy: the change since measurement start
    base = [0] * len(CPU.counters)
    base[CPU.index("cpu_busy_time")] = 500_000
    fake_collector.handler = lambda kind, payload: {"entity": "cpu", "at": iso(at_us), "records": [
        {"key": "cpu=1", "ids": {"cpu": 1}, "cpu": 1, "record_at": iso(at_us - 60_000_000),
         "counters": dict(zip(names, counters, strict=True)), "baseline_at": iso(at_us - 4_000_000),
         "baseline": dict(zip(names, base, strict=True))}]}
    r = client.get("/active/cpu", params={"ids": "cpu:1", "measurement_id": mid, "counters": "cpu_busy_time"}, headers=read_headers)
    assert r.json()["records"][0]["values"] == {"cpu_busy_time": 50.0}   # 2 s busy of 4 s
    assert r.json()["records"][0]["delta_seconds"] == 4.0


def test_active_read_errors(client, fake_collector, read_headers):
    def refuse(kind, payload):
        raise FakeError(ErrorKind.INVALID, "CPU 9 is down")

    fake_collector.handler = refuse
    r = client.get("/active/cpu", params={"ids": "cpu:9"}, headers=read_headers)
    assert (r.status_code, r.json()["detail"]) == (422, "collector: CPU 9 is down")
    assert client.get("/active/discopen", headers=read_headers).json()["field"] == "entity"
    assert client.get("/active/cpu", params={"ids": "pin:3"}, headers=read_headers).json()["field"] == "ids.pin"
    assert client.get("/active/cpu", params={"counters": "nope"}, headers=read_headers).status_code == 404
    assert client.get("/active/cpu", params={"measurement_id": 999999}, headers=read_headers).status_code == 404


def test_active_read_without_collector_is_503(client, read_headers):
    r = client.get("/active/cpu", headers=read_headers)
    assert r.status_code == 503 and "no collector answered" in r.json()["detail"]
