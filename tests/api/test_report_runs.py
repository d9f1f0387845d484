"""/reports: scheduled-report definitions, runs (filters, cursor paging) and a run's output in
text, CSV or JSON; reads follow the API's token rules."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import psycopg
import pytest

from core.scheduler import run_due
from tests.api.conftest import SYSTEM, make_client

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.fixture(scope="module")
def made(api_db_url: str) -> dict[str, list[int]]:
    """Two daily slots (2 and 3 May 2024, 06:00 Berlin) of three definitions of \\APIT."""
    with psycopg.connect(api_db_url) as c:
        for name, report, params, outputs in (
                ("api-cc", "condensation-check", {"day": "yesterday"}, ["text"]),
                ("api-th", "threshold", {"day": "yesterday"}, ["text", "csv"]),
                ("api-broken", "no-such-report", {}, ["text"])):
            c.execute("INSERT INTO _measure.report_definition (name, report, system_id, parameters, schedule, outputs) "
                      "SELECT %s, %s, system_id, %s, '0 6 * * *', %s FROM _measure.system WHERE system_name = %s",
                      (name, report, psycopg.types.json.Jsonb(params), outputs, SYSTEM))
    for day in (2, 3):
        run_due(api_db_url, datetime(2024, 5, day, 6, 1, tzinfo=BERLIN), instance="api-test")
    with psycopg.connect(api_db_url) as c:
        rows = c.execute("SELECT definition, run_id FROM measure.report_run WHERE definition LIKE 'api-%' "
                         "ORDER BY run_id").fetchall()
    out: dict[str, list[int]] = {}
    for name, run_id in rows:
        out.setdefault(name, []).append(run_id)
    return out


def test_definitions_list_the_1986_routine_and_our_own(client, made) -> None:
    r = client.get("/reports/definitions")
    assert r.status_code == 200, r.text
    by_name = {d["name"]: d for d in r.json()["items"]}
    assert {"daily-threshold", "daily-condensation-check", "weekly-shift-summary", "monthly-cpu-trend",
            "monthly-capacity-forecast", "api-cc", "api-th", "api-broken"} <= set(by_name)
    assert by_name["daily-threshold"]["system_name"] is None
    assert by_name["daily-threshold"]["parameters"] == {"day": "yesterday", "shift": None}
    assert (by_name["api-th"]["system_name"], by_name["api-th"]["schedule"], by_name["api-th"]["outputs"]) == (
        SYSTEM, "0 6 * * *", ["text", "csv"])


def test_runs_are_listed_newest_first_and_paged(client, made) -> None:
    r = client.get("/reports/runs", params={"definition": "api-cc"})
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert [i["run_id"] for i in items] == sorted(made["api-cc"], reverse=True)
    assert [i["local_slot"] for i in items] == ["2024-05-03T06:00:00+02:00", "2024-05-02T06:00:00+02:00"]
    assert [i["parameters"]["day"] for i in items] == ["2024-05-02", "2024-05-01"]
    assert all(i["status"] == "succeeded" and i["rows"] == 24 and i["formats"] == ["text", "json"] for i in items)
    first = client.get("/reports/runs", params={"definition": "api-cc", "limit": 1}).json()
    assert [i["run_id"] for i in first["items"]] == [items[0]["run_id"]] and first["next_cursor"]
    second = client.get("/reports/runs", params={"definition": "api-cc", "limit": 1,
                                                 "cursor": first["next_cursor"]}).json()
    assert [i["run_id"] for i in second["items"]] == [items[1]["run_id"]] and second["next_cursor"] is None


def test_runs_filter_by_status_system_report_and_slot(client, made) -> None:
    failed = client.get("/reports/runs", params={"status": "failed", "definition": "api-broken"}).json()["items"]
    assert [(i["local_slot"][:10], i["attempt"]) for i in failed] == [("2024-05-03", 1), ("2024-05-02", 2)]
    assert all("unknown report 'no-such-report'" in i["error"] and i["formats"] == [] for i in failed)
    assert failed[0]["retry_after"] == "2024-05-04T04:00:00Z"
    got = client.get("/reports/runs", params={"report": "threshold", "system": SYSTEM.lower(),
                                              "slot_from": "2024-05-03T00:00:00Z",
                                              "slot_to": "2024-05-04T00:00:00+02:00"}).json()["items"]
    assert [i["run_id"] for i in got] == [made["api-th"][1]]
    assert client.get("/reports/runs", params={"system": "\\NOWHERE"}).json() == {"items": [], "next_cursor": None}


def test_a_run_in_each_format(client, made) -> None:
    run_id = made["api-cc"][0]
    text = client.get(f"/reports/runs/{run_id}").json()
    assert (text["format"], text["status"], text["definition"]) == ("text", "succeeded", "api-cc")
    assert text["output"].splitlines()[0].strip() == "CONDENSATION CHECK" and "DT12200" in text["output"]
    rows = json.loads(client.get(f"/reports/runs/{run_id}", params={"format": "json"}).json()["output"])
    assert len(rows) == 24 and rows[0]["time_of_day"] == "00:00" and rows[0]["problems"] == "no data"
    # CSV was not stored for this definition: rendered from the stored rows
    csv_ = client.get(f"/reports/runs/{run_id}", params={"format": "csv"}).json()["output"]
    assert csv_.splitlines()[0].startswith("hour_at,time_of_day,loadid,") and len(csv_.splitlines()) == 25
    raw = client.get(f"/reports/runs/{run_id}/output", params={"format": "csv"})
    assert raw.status_code == 200 and raw.headers["content-type"].startswith("text/csv") and raw.text == csv_
    raw = client.get(f"/reports/runs/{run_id}/output")
    assert raw.headers["content-type"].startswith("text/plain") and raw.text == text["output"]
    raw = client.get(f"/reports/runs/{run_id}/output", params={"format": "json"})
    assert raw.headers["content-type"] == "application/json" and raw.json() == rows


def test_failed_and_unknown_runs(client, made) -> None:
    failed = made["api-broken"][0]
    r = client.get(f"/reports/runs/{failed}")
    assert r.status_code == 200 and r.json()["output"] is None and r.json()["status"] == "failed"
    r = client.get(f"/reports/runs/{failed}/output")
    assert r.status_code == 409 and "is failed: unknown report 'no-such-report'" in r.json()["detail"]
    r = client.get("/reports/runs/999999999")
    assert (r.status_code, r.json()["error"], r.json()["field"]) == (404, "NotFound", "run_id")
    assert client.get("/reports/runs/999999999/output").status_code == 404


def test_bad_filters_are_named(client, made) -> None:
    r = client.get("/reports/runs", params={"slot_from": "2024-05-03T00:00:00"})
    assert (r.status_code, r.json()["field"]) == (422, "slot_from")
    r = client.get("/reports/runs", params={"cursor": "abc"})
    assert (r.status_code, r.json()["field"]) == (422, "cursor")
    r = client.get("/reports/runs", params={"status": "lost"})
    assert (r.status_code, r.json()["field"]) == (422, "status")
    r = client.get(f"/reports/runs/{made['api-cc'][0]}", params={"format": "pdf"})
    assert (r.status_code, r.json()["field"]) == (422, "format")


def test_reads_need_a_token_when_the_server_says_so(api_db_url, read_headers, made) -> None:
    with make_client(api_db_url, require_token_for_reads=True) as strict:
        for path in ("/reports/definitions", "/reports/runs", f"/reports/runs/{made['api-cc'][0]}",
                     f"/reports/runs/{made['api-cc'][0]}/output"):
            assert strict.get(path).status_code == 401
            assert strict.get(path, headers=read_headers).status_code == 200
        assert strict.get("/reports/runs", headers={"Authorization": "Bearer nope"}).status_code == 401


# ---------------------------------------------------------------- running a report now


def test_run_a_report_now_in_every_format(client) -> None:
    params = {"system": SYSTEM, "date": "2024-05-02"}
    r = client.get("/reports/threshold", params={**params, "format": "text"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    # the system has no measured hour that day: no data, not "no violations"
    assert "THRESHOLD REPORT" in r.text and "NO THRESHOLD VIOLATIONS" not in r.text
    assert f"NO DATA: {SYSTEM} has no measured hour on 2024-05-02 (it holds no condensed hour yet)" in r.text
    assert r.headers["x-report-data"] == "none"
    r = client.get("/reports/threshold", params=params)
    assert (r.status_code, r.headers["content-type"], r.json()) == (200, "application/json", [])
    assert r.headers["x-report-data"] == "none"
    r = client.get("/reports/threshold", params={**params, "format": "csv"})
    assert r.text.splitlines()[0].startswith("cpu,time_of_day,")
    r = client.get("/reports/cpu-trend", params={"system": SYSTEM, "from": "2024-05-01", "to": "2024-05-03"})
    assert r.status_code == 200 and r.json() == []


@pytest.mark.parametrize(("path", "params", "field", "words"), [
    ("/reports/threshold", {"system": SYSTEM}, "date", "needs date"),
    ("/reports/threshold", {"system": SYSTEM, "date": "May 2"}, "date", "'May 2' is not a date, YYYY-MM-DD (2026-11-17)"),
    ("/reports/threshold", {"system": SYSTEM, "date": "2024-02-30"}, "date", "is not a date"),
    ("/reports/threshold", {"system": "\\NOPE", "date": "2024-05-02"}, "system", "NOPE"),
    ("/reports/cpu-trend", {"system": SYSTEM, "from": "2024-05-03", "to": "2024-05-01"}, None, "after"),
])
def test_report_errors_name_the_field(client, path, params, field, words) -> None:
    r = client.get(path, params=params)
    assert r.status_code == 422, r.text
    body = r.json()
    assert words in body["detail"]
    if field is not None:
        assert body.get("field") == field


def test_unknown_report_is_a_422_listing_the_names(client) -> None:
    r = client.get("/reports/no-such-report")
    assert r.status_code == 422
    assert "threshold" in r.json()["detail"]


def test_running_a_report_follows_the_read_token_rule(api_db_url, read_headers) -> None:
    with make_client(api_db_url, require_token_for_reads=True) as c:
        params = {"system": SYSTEM, "date": "2024-05-02"}
        assert c.get("/reports/threshold", params=params).status_code == 401
        assert c.get("/reports/threshold", params=params, headers=read_headers).status_code == 200
