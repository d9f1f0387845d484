"""/admin/systems/{system}/analysis and /admin/analysis/…: the automatic analysis's settings over
the API for admin tokens, the same as `measuredb analysis`, on the data set of
tests/queries/test_analysis.py (\\ANA; tests/analysis_data.py). A database of its own: these
tests commit, and each leaves the settings as it found them."""

from __future__ import annotations

import psycopg
import pytest

from core import schema as schema_runner
from tests import analysis_data
from tests.analysis_data import (
    DEFAULT_EXCEPTIONS,
    JUDGED_HOURS,
    ONE_WEEK_EXCEPTIONS,
    exceptions,
    stored_rows,
)
from tests.api.conftest import make_client
from tests.engine import MODE
from tests.tokens import create_token

DEFAULT_SETTINGS = [{"setting": "weeks", "value": 4, "default": 4, "source": "default"},
                    {"setting": "minor", "value": 3, "default": 3, "source": "default"},
                    {"setting": "major", "value": 5, "default": 5, "source": "default"},
                    {"setting": "relative_floor", "value": 0.25, "default": 0.25, "source": "default"}]


@pytest.fixture(scope="module")
def url(fresh_database) -> str:
    url = fresh_database("_api_analysis")
    schema_runner.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        analysis_data.load(c)
    return url


@pytest.fixture(scope="module")
def client(url):
    with make_client(url) as c:
        yield c


@pytest.fixture(scope="module")
def admin(url) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(url, 'analysis-admin', 'admin')}"}


@pytest.fixture(scope="module")
def writer(url) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(url, 'analysis-write', 'write')}"}



def stored(url: str) -> tuple:
    with psycopg.connect(url) as c:
        return (c.execute("SELECT weeks, minor, major, relative_floor FROM _measure.analysis_setting").fetchall(),
                c.execute("SELECT floor FROM _measure.baseline_item WHERE entity = 'cpu' AND item = 'busy'").fetchone(),
                c.execute("SELECT limit_value, weight FROM _measure.health_indicator "
                          "WHERE indicator = 'cpu_queuing'").fetchone(),
                stored_rows(url))


ENDPOINTS = [("get", "/admin/systems/ANA/analysis", None), ("put", "/admin/systems/ANA/analysis", {"weeks": 2}),
             ("delete", "/admin/systems/ANA/analysis", None),
             ("put", "/admin/analysis/floors/cpu/busy", {"floor": 5}),
             ("put", "/admin/analysis/indicators/cpu_queuing", {"limit": 3})]


def test_every_endpoint_needs_an_admin_token(client, writer, url) -> None:
    before = stored(url)
    for method, path, body in ENDPOINTS:
        kwargs = {} if body is None else {"json": body}
        r = client.request(method, path, **kwargs)
        assert r.status_code == 401 and "admin token" in r.json()["detail"], path
        r = client.request(method, path, headers=writer, **kwargs)
        assert r.status_code == 403 and "needs an admin token" in r.json()["detail"], path
    assert stored(url) == before


def report(client) -> list[tuple]:
    r = client.get("/reports/exceptions", params={"system": "ANA", "from": "2024-04-01", "to": "2024-05-05"})
    assert r.status_code == 200, r.text
    return [(row["local_hour"].replace("T", " "), row["severity"], row["weeks"]) for row in r.json()]


def test_one_week_learned_changes_the_exceptions_as_the_sql_does(client, admin, url) -> None:
    assert exceptions(url) == DEFAULT_EXCEPTIONS
    assert report(client) == [(h, s, w) for h, _, s, w in DEFAULT_EXCEPTIONS]
    r = client.put("/admin/systems/ANA/analysis", headers=admin, json={"weeks": 1, "minor": 4, "major": 20})
    assert r.status_code == 200, r.text
    rows = stored_rows(url)
    assert r.json()["rejudged"] == {"systems": 1, "hours": JUDGED_HOURS, "rows": rows}
    assert r.json()["settings"] == [
        {"setting": "weeks", "value": 1, "default": 4, "source": "system"},
        {"setting": "minor", "value": 4, "default": 3, "source": "system"},
        {"setting": "major", "value": 20, "default": 5, "source": "system"},
        {"setting": "relative_floor", "value": 0.25, "default": 0.25, "source": "default"}]
    assert exceptions(url) == ONE_WEEK_EXCEPTIONS
    shown = client.get("/admin/systems/ana/analysis", headers=admin).json()
    assert shown["system"] == "\\ANA" and shown["settings"] == r.json()["settings"]
    assert {"entity": "tmf", "item": "lifetime", "floor": 0.5} in shown["floors"]
    assert shown["indicators"][0] == {"indicator": "cpu_over_utilised", "limit": 70, "weight": 20,
                                      "symptom": "High CPU utilisation"}
    # GET /reports/exceptions answers with them at once (its cached answer of before is dropped)
    assert report(client) == [("2024-04-24 10:00:00", "minor", 1), ("2024-05-02 10:00:00", "minor", 1)]
    r = client.delete("/admin/systems/ANA/analysis", headers=admin)
    assert r.status_code == 200 and r.json()["settings"] == DEFAULT_SETTINGS
    assert r.json()["rejudged"] == {"systems": 1, "hours": JUDGED_HOURS, "rows": rows}
    assert exceptions(url) == DEFAULT_EXCEPTIONS and stored(url)[0] == []
    # nothing of its own to reset: nothing judged again
    r = client.delete("/admin/systems/ANA/analysis", headers=admin)
    assert r.status_code == 200 and r.json()["rejudged"] == {"systems": 0, "hours": 0, "rows": 0}


@pytest.mark.parametrize(("path", "body", "status", "field", "detail"), [
    ("/admin/systems/ANA/analysis", {"weeks": 1, "major": 2}, 422, "major", "major: 2 is not above the minor band (3)"),
    ("/admin/systems/ANA/analysis", {"minor": 6}, 422, "minor", "minor: 6 is not below the major band (5)"),
    ("/admin/systems/ANA/analysis", {"weeks": 53}, 422, "weeks", None),
    ("/admin/systems/ANA/analysis", {"minor": 0}, 422, "minor", None),
    ("/admin/systems/ANA/analysis", {"relative_floor": -1}, 422, "relative_floor", None),
    ("/admin/systems/ANA/analysis", {"weeks": "2"}, 422, "weeks", None),
    ("/admin/systems/ANA/analysis", {"days": 2}, 422, "days", None),
    ("/admin/systems/NOSUCH/analysis", {"weeks": 2}, 404, "system", "unknown system NOSUCH"),
    ("/admin/analysis/floors/cpu/busy_max", {"floor": 5}, 422, "item",
     "item: busy_max is no baseline item of cpu (busy, qlen)"),
    ("/admin/analysis/floors/volume/busy", {"floor": 5}, 422, "entity", None),
    ("/admin/analysis/floors/cpu/busy", {"floor": 0}, 422, "floor", None),
    ("/admin/analysis/indicators/cpu_queuing", {"weight": 40}, 422, "weight",
     "weight: 40 would make the weights add up to 125 (at most 100: the score is 100 minus the weights of the "
     "indicators present)"),
    ("/admin/analysis/indicators/cpu_queuing", {"limit": -1}, 422, "limit", None),
    ("/admin/analysis/indicators/nosuch", {"limit": 1}, 422, "indicator", None),
])
def test_bad_values_are_refused_naming_the_field_and_change_nothing(client, admin, url, path, body, status, field,
                                                                     detail) -> None:
    before = stored(url)
    r = client.put(path, headers=admin, json=body)
    assert r.status_code == status, r.text
    assert r.json()["field"] == field
    if detail is not None:
        assert r.json()["detail"] == detail
    assert stored(url) == before


def test_a_floor_and_an_indicator(client, admin, url) -> None:
    # CPU busy floor 20: scale 20/3, 55 % is 2.25 scales above (within), 90 % 7.5 (major)
    r = client.put("/admin/analysis/floors/cpu/busy", headers=admin, json={"floor": 20})
    assert r.status_code == 200, r.text
    assert r.json() == {"floor": {"entity": "cpu", "item": "busy", "floor": 20},
                        "rejudged": {"systems": 1, "hours": JUDGED_HOURS, "rows": stored_rows(url)}}
    assert exceptions(url) == [("2024-04-24 10:00:00", 7.5, "major", 3), ("2024-05-01 10:00:00", 7.5, "major", 4)]
    assert client.put("/admin/analysis/floors/cpu/busy", headers=admin, json={"floor": 10}).json()["rejudged"]["hours"] == JUDGED_HOURS
    assert exceptions(url) == DEFAULT_EXCEPTIONS
    r = client.put("/admin/analysis/indicators/cpu_queuing", headers=admin, json={"limit": 3, "weight": 10})
    assert r.status_code == 200, r.text
    assert r.json() == {"indicator": {"indicator": "cpu_queuing", "limit": 3, "weight": 10,
                                      "symptom": "Processes waiting for a CPU"}, "weights": 95}
    r = client.put("/admin/analysis/indicators/cpu_queuing", headers=admin, json={"limit": 2, "weight": 15})
    assert r.json()["weights"] == 100
