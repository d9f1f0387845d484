"""/measurements: create (CONTAB JSON, MEASCOM), list, show, start, stop, delete, status,
configuration; errors named by field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from api.measurements.service import contab_commands
from collector.meascom.configure import apply_commands
from collector.meascom.parser import parse_script
from collector.measure.contab import ContabBuilder
from core.errors import ErrorKind
from tests.api.conftest import SYSTEM
from tests.api.fakes import FakeError

CONTAB = {"descriptors": [{"type": "CPU"}, {"type": "CPU", "fields": {"cpu": 6}, "exclude": True}]}
_names = iter(f"M{i}" for i in range(1, 10_000))


def new_name() -> str:
    return next(_names)


def create(client, headers, **body):
    body = {"name": new_name(), "contab": CONTAB, **body}
    r = client.post("/measurements", json=body, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


def test_create_from_contab_configured(client, write_headers):
    m = create(client, write_headers)
    assert (m["state"], m["system_name"], m["start_at"], m["source"]) == ("configured", SYSTEM, None, None)
    got = client.get(f"/measurements/{m['measurement_id']}").json()
    assert got == m


def test_create_and_start_for_with_interval(client, write_headers):
    before = datetime.now(UTC)
    m = create(client, write_headers, start=True, for_seconds=3600, interval_seconds=60)
    start = datetime.fromisoformat(m["start_at"])
    assert m["state"] == "scheduled" and m["interval_seconds"] == 60
    assert before <= start <= datetime.now(UTC)
    assert datetime.fromisoformat(m["stop_at"]) - start == timedelta(hours=1)


def test_create_from_meascom(client, write_headers):
    text = ("ADD CPU *\nDELETE CPU 6\nADD DISC $DATA1\nADD MEASUREMENT MCOM1\n"
            "START MEASUREMENT MCOM1, FROM 1 JAN 2040, 08:00, FOR 8 HOURS, INTERVAL 15 MINUTES")
    r = client.post("/measurements", json={"meascom": text}, headers=write_headers)
    assert r.status_code == 201, r.text
    m = r.json()
    assert m["name"] == "MCOM1" and m["source"] == text and m["interval_seconds"] == 900
    # FROM is local time of the system (Europe/Berlin: UTC+1 in January)
    assert datetime.fromisoformat(m["start_at"]) == datetime(2040, 1, 1, 7, 0, tzinfo=UTC)
    assert datetime.fromisoformat(m["stop_at"]) == datetime(2040, 1, 1, 15, 0, tzinfo=UTC)
    conf = client.get(f"/measurements/{m['measurement_id']}/configuration").json()
    assert conf["commands"] == ["ADD CPU *", "DELETE CPU 6", "ADD DISC $DATA1", "ADD MEASUREMENT MCOM1"]
    client.post(f"/measurements/{m['measurement_id']}/stop", headers=write_headers)


def test_configuration_commands_round_trip_through_meascom():
    b = ContabBuilder()
    b.add("CPU")
    b.delete("CPU", {"cpu": 3})
    b.add("PROCESS", {"process_name": "$DB1"})
    b.add("PROCESS", {"cpu": 2, "pin": 45})
    b.add("FILE", {"file_name": "$DATA.SALES.*"})
    b.add("DISC", {"device_name": "$DATA1", "cpu": 1})
    b.add("TERMINAL", {"line_name": "$LN1", "subdev_name": "#T1"})
    b.add("SYSTEM", {"remote_system_name": "\\EAST"})
    b.add_counter("REQUESTS", "$PROGS.SERVER1.*", "ACCUM", array=3)
    contab = b.build()
    lines = contab_commands(contab, "RT1")
    again = apply_commands(ContabBuilder(), parse_script("\n".join(lines))).build()
    assert again.ordered() == contab.ordered()
    assert again.counters == contab.counters
    assert not any(line.startswith("==") for line in lines)


@pytest.mark.parametrize(
    ("body", "field", "detail"),
    [
        ({"name": "X1"}, "contab", "exactly one of contab"),
        ({"name": "X1", "contab": CONTAB, "meascom": "ADD CPU *"}, "contab", "exactly one of contab"),
        ({"name": "X1", "contab": {"descriptors": [{"type": "CPU", "fields": {"cpu": 99}}]}},
         "contab", "descriptor 1 (CPU): field 'cpu' must be an integer 0-15"),
        ({"name": "X1", "contab": {"descriptors": [{"type": "NOPE"}]}}, "contab", "unknown entity type"),
        ({"name": "X1", "contab": {"descriptors": []}}, "contab", "measures nothing"),
        ({"contab": CONTAB}, "name", "name the measurement"),
        ({"name": "1BAD", "contab": CONTAB}, "name", "'1BAD' is not a measurement (data file) name: a letter and up to 7 letters or digits"),
        ({"meascom": "ADD CPU 99"}, "meascom", "line 1"),
        ({"meascom": "ADD CPU *\nLIST CPU *"}, "meascom", "not a configuration command"),
        ({"name": "X1", "contab": CONTAB, "stop_at": "2040-01-01T00:00:00Z", "for_seconds": 60},
         "for_seconds", "not both"),
        ({"name": "X1", "contab": CONTAB, "start_at": "2040-01-02T00:00:00Z",
          "stop_at": "2040-01-01T00:00:00Z"}, "stop_at", "not after start time"),
        ({"name": "X1", "contab": CONTAB, "start_at": "2040-01-02T00:00:00"}, "start_at", "time zone"),
        ({"name": "X1", "contab": CONTAB, "system": "\\NOPE"}, "system", "unknown system"),
        ({"name": "X1", "contab": CONTAB, "interval_seconds": 0}, "interval_seconds", "greater than"),
    ],
)
def test_create_errors_name_the_field(client, write_headers, body, field, detail):
    r = client.post("/measurements", json=body, headers=write_headers)
    assert r.status_code in (404, 422), r.text
    err = r.json()
    assert err["field"].startswith(field), err
    assert detail in err["detail"]


def test_duplicate_live_name_is_409(client, write_headers):
    m = create(client, write_headers)
    r = client.post("/measurements", json={"name": m["name"].lower(), "contab": CONTAB}, headers=write_headers)
    assert r.status_code == 409 and r.json()["field"] == "name"


def test_list_pages_by_cursor(client, write_headers):
    made = {create(client, write_headers)["measurement_id"] for _ in range(3)}
    seen, cursor = [], None
    while True:
        params = {"limit": 2, "state": "configured", **({"cursor": cursor} if cursor else {})}
        page = client.get("/measurements", params=params).json()
        seen += [m["measurement_id"] for m in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert made <= set(seen) and len(seen) == len(set(seen)) and seen == sorted(seen)
    assert client.get("/measurements", params={"cursor": "abc"}).json()["field"] == "cursor"


def test_start_stop_delete_cycle(client, write_headers):
    mid = create(client, write_headers)["measurement_id"]
    r = client.post(f"/measurements/{mid}/start", json={"for_seconds": 600, "interval_seconds": 30},
                    headers=write_headers)
    assert r.status_code == 200 and r.json()["state"] == "scheduled"
    m = r.json()
    assert datetime.fromisoformat(m["stop_at"]) - datetime.fromisoformat(m["start_at"]) == timedelta(seconds=600)
    again = client.post(f"/measurements/{mid}/start", headers=write_headers)
    assert again.status_code == 409 and "only a configured measurement" in again.json()["detail"]
    assert client.delete(f"/measurements/{mid}", headers=write_headers).status_code == 409
    stop_at = datetime.now(UTC) + timedelta(minutes=5)
    r = client.post(f"/measurements/{mid}/stop", json={"stop_at": stop_at.isoformat()}, headers=write_headers)
    assert r.status_code == 200 and datetime.fromisoformat(r.json()["stop_at"]) == stop_at
    # the collector marks it stopped; then it can be deleted
    with psycopg.connect(client.app.state.engine.url.render_as_string(hide_password=False)
                         .replace("postgresql+psycopg", "postgresql")) as c:
        c.execute("UPDATE _measure.measurement SET state = 'stopped', stopped_at = now() WHERE measurement_id = %s",
                  (mid,))
    assert client.post(f"/measurements/{mid}/stop", headers=write_headers).status_code == 409
    assert client.delete(f"/measurements/{mid}", headers=write_headers).status_code == 204
    assert client.get(f"/measurements/{mid}").status_code == 404


def test_stop_before_start_never_runs(client, write_headers):
    m = create(client, write_headers, start_at="2041-01-01T00:00:00Z")
    r = client.post(f"/measurements/{m['measurement_id']}/stop", headers=write_headers)
    assert r.json()["state"] == "stopped" and r.json()["state_detail"] == "stopped before it started"


def test_start_errors(client, write_headers):
    mid = create(client, write_headers)["measurement_id"]
    r = client.post(f"/measurements/{mid}/start", json={"for_seconds": 60, "stop_at": "2040-01-01T00:00:00Z"},
                    headers=write_headers)
    assert r.status_code == 422 and r.json()["field"] == "for_seconds"
    r = client.post("/measurements/999999/start", headers=write_headers)
    assert r.status_code == 404 and r.json()["field"] == "measurement_id"
    assert client.delete("/measurements/999999", headers=write_headers).status_code == 404
    assert client.get("/measurements/999999/configuration").status_code == 404


def test_status_of_configured_measurement_needs_no_collector(client, write_headers, read_headers):
    m = create(client, write_headers)
    body = client.get(f"/measurements/{m['measurement_id']}/status", headers=read_headers).json()
    assert body == {"measurement_id": m["measurement_id"], "name": m["name"], "state": "configured",
                    "collector": None}


def test_status_asks_the_collector(client, write_headers, fake_collector, read_headers):
    m = create(client, write_headers, start=True)
    answer = {"status": {"measurement_id": m["measurement_id"], "name": m["name"], "state": "running",
                         "entities": {"cpu": 4}, "counter_space_words": 512, "cids": 4,
                         "copies_written": 12, "not_allocated": {}},
              "cpus": {"0": {"cids": 4, "cid_limit": 512, "words": 512, "words_limit": 4_000_000}},
              "at": "2026-01-01T08:00:00+00:00"}
    fake_collector.handler = lambda kind, payload: answer
    r = client.get(f"/measurements/{m['measurement_id']}/status", headers=read_headers)
    assert r.status_code == 200, r.text
    assert r.json()["collector"] == answer
    assert fake_collector.seen[-1] == ("status", {"measurement_id": m["measurement_id"]})

    def refuse(kind, payload):
        raise FakeError(ErrorKind.NOT_FOUND, "no measurement 1 in MEASMON")

    fake_collector.handler = refuse
    r = client.get(f"/measurements/{m['measurement_id']}/status", headers=read_headers)
    assert r.status_code == 404 and r.json()["detail"] == "collector: no measurement 1 in MEASMON"


def test_status_without_collector_is_503(client, write_headers, api_db_url, read_headers):
    m = create(client, write_headers, start=True)
    r = client.get(f"/measurements/{m['measurement_id']}/status", headers=read_headers)
    assert r.status_code == 503
    assert "no collector answered request" in r.json()["detail"]
