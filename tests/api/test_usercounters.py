"""/usercounters/bump-init and /usercounters/bump through the (fake) collector."""

from __future__ import annotations

from core.errors import ErrorKind
from tests.api.fakes import FakeError


def test_bump_init_and_bump(client, write_headers, fake_collector):
    def answer(kind, payload):
        if kind == "bump_init":
            return {"offset": 17 if payload["ids"]["name"] == "REQUESTS" else -1}
        return {"bumped": payload["offset"] == 17, "at": "2026-01-01T08:00:00+00:00"}

    fake_collector.handler = answer
    r = client.post("/usercounters/bump-init", json={"cpu": 2, "pin": 45, "name": "requests"}, headers=write_headers)
    assert r.status_code == 200 and r.json() == {"offset": 17}
    assert fake_collector.seen[-1] == ("bump_init", {"ids": {"cpu": 2, "pin": 45, "name": "REQUESTS", "index": 0}})
    r = client.post("/usercounters/bump-init", json={"cpu": 2, "pin": 45, "name": "OTHER"}, headers=write_headers)
    assert r.json() == {"offset": -1}
    r = client.post("/usercounters/bump", json={"cpu": 2, "pin": 45, "name": "REQUESTS", "offset": 17,
                                                "op": "ADD", "value": 3}, headers=write_headers)
    assert r.status_code == 200 and r.json() == {"bumped": True}
    assert fake_collector.seen[-1][1] == {"ids": {"cpu": 2, "pin": 45, "name": "REQUESTS", "index": 0},
                                          "offset": 17, "op": "ADD", "value": 3}


def test_bump_errors(client, write_headers, fake_collector):
    def refuse(kind, payload):
        raise FakeError(ErrorKind.CONFLICT, "counter REQUESTS is a BUSY counter; use SETBUSY/RESETBUSY")

    fake_collector.handler = refuse
    r = client.post("/usercounters/bump", json={"cpu": 2, "pin": 45, "name": "REQUESTS", "op": "INC"},
                    headers=write_headers)
    assert r.status_code == 409 and "BUSY counter" in r.json()["detail"]
    r = client.post("/usercounters/bump", json={"cpu": 2, "pin": 45, "name": "R", "op": "PUSH"}, headers=write_headers)
    assert r.status_code == 422 and r.json()["field"] == "op"
    r = client.post("/usercounters/bump-init", json={"cpu": 16, "pin": 45, "name": "R"}, headers=write_headers)
    assert r.status_code == 422 and r.json()["field"] == "cpu"
    r = client.post("/usercounters/bump-init", json={"cpu": 1, "pin": 45, "name": "R", "system": "\\NOPE"},
                    headers=write_headers)
    assert r.status_code == 404 and r.json()["field"] == "system"


def test_bump_without_collector_is_503(client, write_headers):
    r = client.post("/usercounters/bump-init", json={"cpu": 2, "pin": 45, "name": "R"}, headers=write_headers)
    assert r.status_code == 503


def test_an_answer_not_of_the_kind_is_503(client, write_headers, fake_collector):
    """The collector's answer is checked against the protocol (core/control.py): one that is
    not a bump_init answer is the collector's fault, not the client's."""
    fake_collector.handler = lambda kind, payload: {"offset": "seventeen"}
    r = client.post("/usercounters/bump-init", json={"cpu": 2, "pin": 45, "name": "R"}, headers=write_headers)
    assert r.status_code == 503 and "bump_init answer is malformed" in r.json()["detail"]
