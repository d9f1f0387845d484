"""/admin/systems and /admin/thresholds: configuration over the API for admin tokens, the same as
`measuredb system | calendar | threshold` (a database of its own: these tests commit)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import psycopg
import pytest

from core import schema as schema_runner
from tests.api.conftest import make_client
from tests.engine import MODE
from tests.tokens import create_token

_spec = importlib.util.spec_from_file_location("test_calendar", Path(__file__).parents[1] / "schema" / "test_calendar.py")
calendar_data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(calendar_data)


@pytest.fixture(scope="module")
def url(fresh_database) -> str:
    url = fresh_database("_api_config")
    schema_runner.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        calendar_data.load(c)         # \CAL: 120 measured hours, Thursday 2024-04-04 to Monday 2024-04-08
    return url


@pytest.fixture(scope="module")
def client(url):
    with make_client(url) as c:
        yield c


@pytest.fixture(scope="module")
def admin(url) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(url, 'config-admin', 'admin')}"}


@pytest.fixture(scope="module")
def writer(url) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(url, 'config-write', 'write')}"}


ENDPOINTS = [("get", "/admin/systems", None), ("post", "/admin/systems", {"name": "X", "number": 1, "time_zone": "UTC"}),
             ("get", "/admin/systems/CAL", None), ("put", "/admin/systems/CAL", {"number": 4}),
             ("delete", "/admin/systems/CAL", None), ("get", "/admin/systems/CAL/calendar", None),
             ("put", "/admin/systems/CAL/calendar/2024-04-06", {"shifts": calendar_data.WEEKDAYS}),
             ("delete", "/admin/systems/CAL/calendar/2024-04-06", None),
             ("put", "/admin/systems/CAL/holidays/2024-04-08", {"name": "x"}),
             ("delete", "/admin/systems/CAL/holidays/2024-04-08", None), ("get", "/admin/thresholds", None),
             ("put", "/admin/thresholds", {"entity": "cpu", "item": "busy_max", "operator": ">", "limit": 1}),
             ("delete", "/admin/thresholds?entity=cpu&item=busy_max&operator=%3E", None)]


def test_every_endpoint_needs_an_admin_token(client, writer) -> None:
    for method, path, body in ENDPOINTS:
        kwargs = {} if body is None else {"json": body}
        r = client.request(method, path, **kwargs)
        assert r.status_code == 401 and "admin token" in r.json()["detail"], path
        r = client.request(method, path, headers=writer, **kwargs)
        assert r.status_code == 403 and "needs an admin token" in r.json()["detail"], path


def test_systems(client, admin) -> None:
    r = client.post("/admin/systems", headers=admin, json={"name": "cfg1", "number": 21, "time_zone": "Europe/Berlin",
                                                            "cpu_types": [{"cpu": None, "cpu_type": "txp"}]})
    assert r.status_code == 201, r.text
    got = r.json()
    assert {k: got[k] for k in ("name", "number", "time_zone", "os_version", "cpu_types", "collector", "measurements",
                                "first_hour", "calendars")} == {
        "name": "\\CFG1", "number": 21, "time_zone": "Europe/Berlin", "os_version": "B30",
        "cpu_types": [{"cpu": None, "cpu_type": "TXP"}], "collector": None, "measurements": 0, "first_hour": None,
        "calendars": 0}
    r = client.post("/admin/systems", headers=admin, json={"name": "\\CFG1", "number": 22, "time_zone": "UTC"})
    assert r.status_code == 409 and r.json()["field"] == "name" and "exists already" in r.json()["detail"]
    r = client.post("/admin/systems", headers=admin, json={"name": "CFG2", "number": 22, "time_zone": "Moon/Base"})
    assert r.status_code == 422 and r.json()["field"] == "time_zone" and "no time zone name" in r.json()["detail"]
    r = client.post("/admin/systems", headers=admin, json={"name": "CFG2", "number": 300, "time_zone": "UTC"})
    assert r.status_code == 422 and r.json()["field"] == "number"
    names = [s["name"] for s in client.get("/admin/systems", headers=admin).json()["items"]]
    assert names == ["\\CAL", "\\CFG1"]                       # nothing of the refused ones
    r = client.get("/admin/systems/nosuch", headers=admin)
    assert r.status_code == 404 and r.json()["field"] == "system" and "unknown system" in r.json()["detail"]
    r = client.put("/admin/systems/CFG1", headers=admin, json={"number": 23, "cpu_types": [
        {"cpu": 0, "cpu_type": "VLX"}, {"cpu": 0, "cpu_type": "TXP"}]})
    assert r.status_code == 422 and r.json()["field"] == "cpu_types[1].cpu" and "given twice" in r.json()["detail"]
    assert client.get("/admin/systems/CFG1", headers=admin).json()["number"] == 21   # not half applied
    r = client.put("/admin/systems/CFG1", headers=admin, json={"number": 23, "os_version": "C30"})
    assert r.status_code == 200 and r.json()["recondensed"] is None
    assert (r.json()["system"]["number"], r.json()["system"]["os_version"]) == (23, "C30")
    r = client.put("/admin/systems/CFG1", headers=admin, json={"time_zone": "Asia/Tokyo"})
    assert r.status_code == 200 and r.json()["recondensed"] == {"days": 0, "hours": 0, "first_day": None,
                                                                "last_day": None}   # no data: nothing to redo
    r = client.delete("/admin/systems/CAL", headers=admin)
    assert r.status_code == 409 and r.json()["field"] == "system" and "never measured" in r.json()["detail"]
    r = client.delete("/admin/systems/CFG1", headers=admin)
    assert r.status_code == 200 and r.json() == {"removed": "\\CFG1"}
    assert client.delete("/admin/systems/CFG1", headers=admin).status_code == 404


def test_calendar_and_holidays_recondense_exactly_the_days_they_change(client, admin, url) -> None:
    r = client.put("/admin/systems/CAL/calendar/2024-04-06", headers=admin,
                   json={"shifts": calendar_data.WEEKDAYS, "holiday_shift": 9})
    assert r.status_code == 200, r.text
    assert r.json() == {"system": "\\CAL", "effective_from": "2024-04-06", "recondensed": {
        "days": 3, "hours": 72, "first_day": "2024-04-06", "last_day": "2024-04-08"}}
    bad = dict(calendar_data.WEEKDAYS[0], begin="07:30")
    r = client.put("/admin/systems/CAL/calendar/2024-04-05", headers=admin, json={"shifts": [bad]})
    assert r.status_code == 422 and r.json()["field"] == "shifts[0].begin"
    assert r.json()["detail"] == "shifts[0].begin: 07:30 is not a whole hour (shifts begin and end on the hour)"
    cal = client.get("/admin/systems/CAL/calendar", headers=admin).json()
    assert [v["effective_from"] for v in cal["versions"]] == ["2024-04-06"]   # the refused one is not there
    assert cal["base"] == {"source": "default", "until": "2024-04-05", "shifts": [
        {"shift_no": 1, "name": "night", "weekdays": [1, 2, 3, 4, 5, 6, 7], "begin": "00:00", "end": "08:00",
         "crosses_midnight": False},
        {"shift_no": 2, "name": "day", "weekdays": [1, 2, 3, 4, 5, 6, 7], "begin": "08:00", "end": "16:00",
         "crosses_midnight": False},
        {"shift_no": 3, "name": "evening", "weekdays": [1, 2, 3, 4, 5, 6, 7], "begin": "16:00", "end": "24:00",
         "crosses_midnight": False}]}
    assert cal["versions"][0]["shifts"][2] == {"shift_no": 3, "name": "night", "weekdays": [1, 2, 3, 4, 5],
                                               "begin": "23:00", "end": "07:00", "crosses_midnight": True}
    r = client.put("/admin/systems/CAL/holidays/2024-04-08", headers=admin, json={"name": "Spring"})
    assert r.status_code == 200 and r.json()["recondensed"] == {"days": 1, "hours": 17, "first_day": "2024-04-08",
                                                                "last_day": "2024-04-08"}
    with psycopg.connect(url) as c:
        assert c.execute("SELECT shift_no, hours, busy_avg FROM measure.cpu_shift WHERE shift_day = '2024-04-08'"
                         ).fetchall() == [(9, 17, 15)]
    assert client.get("/admin/systems/CAL/calendar", headers=admin).json()["holidays"] == [
        {"day": "2024-04-08", "name": "Spring"}]
    assert client.delete("/admin/systems/CAL/holidays/2024-04-08", headers=admin).json()["recondensed"]["days"] == 1
    r = client.delete("/admin/systems/CAL/holidays/2024-04-08", headers=admin)
    assert r.status_code == 404 and r.json()["field"] == "day"
    r = client.delete("/admin/systems/CAL/calendar/2024-04-06", headers=admin)
    assert r.status_code == 200 and r.json()["recondensed"]["days"] == 3
    r = client.delete("/admin/systems/CAL/calendar/2024-04-06", headers=admin)
    assert r.status_code == 404 and r.json()["field"] == "effective_from"


def test_thresholds(client, admin, url) -> None:
    body = {"system": "CAL", "entity": "cpu", "item": "busy_max", "operator": ">", "limit": 20}
    r = client.put("/admin/thresholds", headers=admin, json=body)
    assert r.status_code == 200, r.text
    assert r.json() == {"threshold": {"system": "\\CAL", "entity": "cpu", "item": "busy_max", "operator": ">",
                                      "shift": None, "limit": 20.0, "enabled": True, "help": ""},
                        "reevaluated": {"systems": 1, "hours": 120}}
    with psycopg.connect(url) as c:     # the report reads it at once
        assert [r[0] for r in c.execute("SELECT time_of_day FROM measure.report_threshold('\\CAL', '2024-04-05')")
                ] == ["21:00", "22:00", "23:00"]
    r = client.put("/admin/thresholds", headers=admin, json={**body, "item": "busy"})
    assert r.status_code == 422 and r.json()["field"] == "item" and "no item of measure.cpu_hour" in r.json()["detail"]
    r = client.put("/admin/thresholds", headers=admin, json={**body, "shift": 8})
    assert r.status_code == 422 and r.json()["field"] == "shift"
    r = client.put("/admin/thresholds", headers=admin, json={**body, "operator": "=="})
    assert r.status_code == 422 and r.json()["field"] == "operator"
    items = client.get("/admin/thresholds", headers=admin, params={"system": "CAL"}).json()["items"]
    assert [(t["system"], t["limit"], t["in_force"], t["source"]) for t in items
            if (t["entity"], t["item"]) == ("cpu", "busy_max")] == [
        ("\\CAL", 20.0, True, "system"), (None, 70.0, False, "default (replaced)")]
    params = {"system": "CAL", "entity": "cpu", "item": "busy_max", "operator": ">"}
    r = client.delete("/admin/thresholds", headers=admin, params=params)
    assert r.status_code == 200 and r.json()["removed"] == {"system": "\\CAL", "entity": "cpu", "item": "busy_max",
                                                            "operator": ">", "shift": None}
    r = client.delete("/admin/thresholds", headers=admin, params=params)
    assert r.status_code == 404 and r.json()["field"] == "item"


def test_openapi_documents_every_answer(client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    expected = {("/admin/systems", "get"): {"200", "401", "403"},
                ("/admin/systems", "post"): {"201", "401", "403", "409", "422"},
                ("/admin/systems/{system}", "put"): {"200", "401", "403", "404", "409", "422"},
                ("/admin/systems/{system}", "delete"): {"200", "401", "403", "404", "409", "422"},
                ("/admin/systems/{system}/calendar/{effective_from}", "put"): {"200", "401", "403", "404", "422"},
                ("/admin/systems/{system}/holidays/{day}", "delete"): {"200", "401", "403", "404", "422"},
                ("/admin/thresholds", "put"): {"200", "401", "403", "404", "422"},
                ("/admin/thresholds", "delete"): {"200", "401", "403", "404", "422"}}
    for (path, method), codes in expected.items():
        assert set(paths[path][method]["responses"]) >= codes, (path, method)
        assert paths[path][method]["tags"] == ["admin"]
