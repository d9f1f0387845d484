"""GET /tiers/{entity}/{tier}: the performance-data-base views over HTTP, on a small data base
built through interval records + _measure.note_intervals + _measure.condense (as the writer
does; see tests/schema/test_tiers_data.py).

System \\TIERS (UTC, default shifts 00-08, 08-16, 16-24), 30-minute intervals on 2024-03-10:
  CPU 0: 08:00 busy 50 %, 08:30 90 %  (hour 08: avg 70, max 90) | 09:00 20 %, 09:30 30 % (avg 25)
  CPU 1: 10 % in all four intervals
  DISC $DATA1 path P, 08:00-09:00: DEVICE-QBUSY 50 %
  PROCESS $S1 (0,10) of $APPL.ET1.SERVER, 08:00-09:00: CPU-BUSY 25 %
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from core import schema as schema_runner
from core.catalog import load_catalog
from tests.api.conftest import make_client
from tests.engine import MODE

CAT = load_catalog()
M = 1_000_000
DAY = datetime(2024, 3, 10, tzinfo=UTC)


def _counters(entity: str, **values: int) -> list[int]:
    ent = CAT.entity(entity)
    out = [0] * len(ent.counters)
    for name, v in values.items():
        out[ent.index(name)] = v
    return out


# A database of this module's own (the shared API database must keep exactly one system).
@pytest.fixture(scope="module")
def api_db_url(fresh_database) -> str:
    url = fresh_database("_tiers_api")
    schema_runner.apply(url, mode=MODE)
    return url


@pytest.fixture(scope="module")
def client(api_db_url: str):
    with make_client(api_db_url) as c:
        yield c


@pytest.fixture(scope="module")
def tiers_system(api_db_url: str) -> str:
    with psycopg.connect(api_db_url) as c:
        sid = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                        "VALUES ('\\TIERS', 7, 'UTC') RETURNING system_id").fetchone()[0]
        mid = c.execute("INSERT INTO _measure.measurement (system_id, name, contab, state) "
                        "VALUES (%s, 'TIERS', '{}', 'stopped') RETURNING measurement_id", (sid,)).fetchone()[0]
        next_id = iter(range(910_001, 910_100))

        def entity(etype: str, cpu: int, ids: dict) -> int:
            eid = next(next_id)
            c.execute("INSERT INTO _measure.entity (entity_id, system_id, type_code, key, ids, cpu, first_seen_at) "
                      "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                      (eid, sid, CAT.entity(etype).code, f"{etype}-{eid}", json.dumps({"cpu": cpu, **ids}),
                       cpu, DAY))
            return eid

        def interval(eid: int, etype: str, cpu: int, start: datetime, minutes: int, **values: int) -> None:
            c.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, "
                      "to_at, delta_us, closing_kind, system_id, type_code, cpu, counters) "
                      "VALUES (%s, %s, %s, %s, %s, %s, 3, %s, %s, %s, %s)",
                      (mid, eid, DAY, start, start + timedelta(minutes=minutes), minutes * 60 * M, sid,
                       CAT.entity(etype).code, cpu, _counters(etype, **values)))

        cpu0, cpu1 = entity("cpu", 0, {}), entity("cpu", 1, {})
        for k, busy in enumerate((50, 90, 20, 30)):
            start = DAY + timedelta(hours=8, minutes=30 * k)
            interval(cpu0, "cpu", 0, start, 30, cpu_busy_time=busy * 18 * M)  # busy % of 1800 s
            interval(cpu1, "cpu", 1, start, 30, cpu_busy_time=10 * 18 * M)
        disc = entity("disc", 0, {"device_name": "$DATA1", "path": "P", "pin": 7})
        interval(disc, "disc", 0, DAY + timedelta(hours=8), 60, device_qbusy_time=1800 * M)
        proc = entity("process", 0, {"pin": 10, "process_name": "$S1", "program_file_name": "$APPL.ET1.SERVER",
                                     "priority": 150})
        interval(proc, "process", 0, DAY + timedelta(hours=8), 60, cpu_busy_time=900 * M)
        c.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)",
                  (sid, DAY + timedelta(hours=8), DAY + timedelta(hours=10)))
        c.execute("SELECT _measure.condense(%s::smallint)", (sid,))
    return "\\TIERS"


def get(client, path, **params):
    return client.get(path, params=params)


def test_hour_tier_rows(client, tiers_system):
    r = get(client, "/tiers/cpu/hour", system=tiers_system)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["entity"], body["tier"], body["requested_tier"], body["view"]) == (
        "cpu", "hour", "hour", "measure.cpu_hour")
    rows = [(x["subject"]["cpu"], x["bucket"]["hour_at"], x["values"]["busy_avg"], x["values"]["busy_max"])
            for x in body["items"]]
    assert rows == [(0, "2024-03-10T08:00:00Z", 70.0, 90.0), (1, "2024-03-10T08:00:00Z", 10.0, 10.0),
                    (0, "2024-03-10T09:00:00Z", 25.0, 30.0), (1, "2024-03-10T09:00:00Z", 10.0, 10.0)]
    assert body["items"][0]["system_name"] == "\\TIERS" and body["next_cursor"] is None
    assert body["items"][0]["bucket"]["loadid"] == "DT07008"


def test_filters(client, tiers_system):
    body = get(client, "/tiers/cpu/hour", system="tiers", cpu=0, **{"from": "2024-03-10T09:00:00Z",
                                                                     "to": "2024-03-10T10:00:00Z"}).json()
    assert [(x["subject"]["cpu"], x["values"]["busy_avg"]) for x in body["items"]] == [(0, 25.0)]
    body = get(client, "/tiers/disc/hour", system=tiers_system, volume="$data1").json()
    assert [(x["subject"]["volume"], x["values"]["busy_avg"]) for x in body["items"]] == [("$DATA1", 50.0)]
    for name in ("$S1", "$APPL.ET1.SERVER"):
        body = get(client, "/tiers/process/hour", system=tiers_system, process=name).json()
        assert [(x["subject"]["process_name"], x["values"]["busy_avg"]) for x in body["items"]] == [("$S1", 25.0)]
    assert get(client, "/tiers/process/hour", system=tiers_system, process="$NONE").json()["items"] == []


def test_shift_tier_and_shift_filter(client, tiers_system):
    body = get(client, "/tiers/cpu/shift", system=tiers_system, cpu=0).json()
    assert [(x["bucket"]["shift_day"], x["bucket"]["shift_no"], x["bucket"]["hours"]) for x in body["items"]] == [
        ("2024-03-10", 2, 2)]
    v = body["items"][0]["values"]
    assert (v["busy_avg"], v["busy_max"], v["busy_min"], v["busy_delt"]) == (47.5, 70.0, 25.0, 45.0)
    assert get(client, "/tiers/cpu/shift", system=tiers_system, shift=1).json()["items"] == []
    month = get(client, "/tiers/cpu/month", system=tiers_system, cpu=0, shift=2).json()["items"]
    assert [(x["bucket"]["month"], x["values"]["busy_avg"]) for x in month] == [("2024-03-01", 47.5)]
    year = get(client, "/tiers/cpu/year", system=tiers_system, cpu=0).json()["items"]
    assert [(x["bucket"]["year"], x["values"]["busy_avg"]) for x in year] == [(2024, 47.5)]


@pytest.mark.parametrize(("frm", "to", "tier"), [
    ("2024-03-10T00:00:00Z", "2024-03-11T00:00:00Z", "hour"),
    ("2024-03-04T00:00:00Z", "2024-03-11T00:00:00Z", "hour"),       # exactly 7 days
    ("2024-01-01T00:00:00Z", "2024-03-11T00:00:00Z", "shift"),
    ("2023-06-01T00:00:00Z", "2024-03-11T00:00:00Z", "month"),
])
def test_auto_picks_the_tier_for_the_range(client, tiers_system, frm, to, tier):
    body = get(client, "/tiers/cpu/auto", system=tiers_system, cpu=0, **{"from": frm, "to": to}).json()
    assert (body["tier"], body["requested_tier"], body["view"]) == (tier, "auto", f"measure.cpu_{tier}")
    assert body["auto_rule"].startswith("hour up to 7 days")
    assert len(body["items"]) == (2 if tier == "hour" else 1)


def test_cursor_paging(client, tiers_system):
    whole = get(client, "/tiers/cpu/hour", system=tiers_system).json()["items"]
    seen, cursor = [], None
    for _ in range(10):
        params = {"system": tiers_system, "limit": 1, **({"cursor": cursor} if cursor else {})}
        body = client.get("/tiers/cpu/hour", params=params).json()
        seen += body["items"]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == whole and len(seen) == 4


@pytest.mark.parametrize(("path", "params", "status", "field"), [
    ("/tiers/discopen/hour", {}, 422, "entity"),
    ("/tiers/cpu/week", {}, 422, "tier"),
    ("/tiers/cpu/hour", {"from": "2024-03-11T00:00:00Z", "to": "2024-03-10T00:00:00Z"}, 422, "from"),
    ("/tiers/cpu/hour", {"from": "yesterday"}, 422, "from"),
    ("/tiers/cpu/hour", {"from": "2024-13-10"}, 422, "from"),
    ("/tiers/cpu/hour", {"to": "10/03/2024"}, 422, "to"),
    ("/tiers/cpu/hour", {"system": "no such!"}, 422, "system"),
    ("/tiers/cpu/hour", {"system": "\\NOPE"}, 404, "system"),
    ("/tiers/cpu/hour", {"shift": 2}, 422, "shift"),
    ("/tiers/cpu/hour", {"volume": "$DATA1"}, 422, "volume"),
    ("/tiers/disc/shift", {"cpu": 1}, 422, "cpu"),
    ("/tiers/line/hour", {"process": "$S1"}, 422, "process"),
    ("/tiers/cpu/auto", {}, 422, "from"),
    ("/tiers/cpu/hour", {"cursor": "zz"}, 422, "cursor"),
    ("/tiers/cpu/hour", {"cpu": 16}, 422, "cpu"),
    ("/tiers/cpu/hour", {"bogus": 1}, 422, "bogus"),
])
def test_bad_input_names_the_field(client, tiers_system, path, params, status, field):
    r = client.get(path, params=params)
    assert r.status_code == status, r.text
    assert r.json()["field"] == field


@pytest.mark.parametrize(("params", "field", "detail"), [
    ({"from": "2024-03-11T00:00:00Z", "to": "2024-03-10T00:00:00Z"}, "from", "is after to"),
    ({"from": "2024-03-11", "to": "2024-03-10"}, "from", "is after to"),
    ({"from": "2024-02-30"}, "from", "'2024-02-30' is no date (YYYY-MM-DD)"),
])
def test_auto_with_a_bad_range_is_a_422_naming_the_field(client, tiers_system, params, field, detail):
    r = client.get("/tiers/cpu/auto", params={"system": tiers_system, **params})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and detail in r.json()["detail"]


@pytest.mark.parametrize("tier", ["hour", "shift", "auto"])
def test_plain_dates_and_local_times_are_the_systems_days(client, tiers_system, tier):
    """A plain date is the day in the system's time zone (UTC for \\TIERS), a date-time without
    an offset its local time: the same rows as the instants they name (the README's
    /tiers?from=2026-11-17&to=2026-11-18; tests/test_readme.py checks a system east of UTC)."""
    def rows(**params):
        r = get(client, f"/tiers/cpu/{tier}", system=tiers_system, cpu=0, **params)
        assert r.status_code == 200, r.text
        return [x["bucket"] for x in r.json()["items"]]

    whole = rows(**{"from": "2024-03-10T00:00:00Z", "to": "2024-03-11T00:00:00Z"})
    assert whole and rows(**{"from": "2024-03-10", "to": "2024-03-11"}) == whole
    assert rows(**{"from": "2024-03-10T00:00", "to": "2024-03-11"}) == whole
    assert rows(**{"from": "2024-03-09", "to": "2024-03-10"}) == []
    if tier == "hour":
        assert [b["hour_at"] for b in rows(**{"from": "2024-03-10T09:00", "to": "2024-03-10T10:00"})] == [
            "2024-03-10T09:00:00Z"]
