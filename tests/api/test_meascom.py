"""POST /meascom: MEASCOM text over HTTP, run by the interpreter as the API role (measure_api):
it reads the measure.* views and writes through the SECURITY DEFINER functions (030-api.sql,
035-meascom.sql), with no rewriting of its statements."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import psycopg
import pytest

from cli import meascom as cli
from core import schema as schema_runner
from core.catalog import load_catalog
from tests.api.conftest import make_client
from tests.collector.meascom.test_parser import FIGURE_3
from tests.engine import MODE
from tests.tokens import create_token

SYSTEM = "\\MEASCOM"
CPU = load_catalog().entity("cpu")


# A database of this module's own (the shared API database must keep exactly one system).
@pytest.fixture(scope="module")
def api_db_url(fresh_database) -> str:
    url = fresh_database("_meascom_api")
    schema_runner.apply(url, mode=MODE)
    return url


@pytest.fixture(scope="module")
def system(api_db_url: str) -> str:
    with psycopg.connect(api_db_url) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                  "VALUES (%s, 11, 'Europe/Berlin')", (SYSTEM,))
    return SYSTEM


@pytest.fixture(scope="module")
def client(api_db_url: str, system: str):
    with make_client(api_db_url) as c:
        yield c


@pytest.fixture(scope="module")
def write_headers(api_db_url: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(api_db_url, 'meascom-write', 'write')}"}


@pytest.fixture(scope="module")
def read_headers(api_db_url: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(api_db_url, 'meascom-read', 'read')}"}


def measurements(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as c:
        return c.execute("SELECT m.name, m.state FROM _measure.measurement m JOIN _measure.system s "
                         "USING (system_id) WHERE s.system_name = %s ORDER BY measurement_id",
                         (SYSTEM,)).fetchall()


def post(client, headers, text, **kw):
    return client.post("/meascom", json={"text": text, "system": SYSTEM, **kw}, headers=headers)


def test_figure_3_creates_the_measurement(client, write_headers, api_db_url, system):
    r = post(client, write_headers, FIGURE_3)
    assert r.status_code == 200, r.text
    out = r.json()["output"]
    assert out.startswith("Measurement CPLNDAY1 (id ") and "scheduled on \\MEASCOM" in out
    assert ("CPLNDAY1", "scheduled") in measurements(api_db_url)
    with psycopg.connect(api_db_url) as c:
        contab, source = c.execute("SELECT contab, source FROM _measure.measurement WHERE name = 'CPLNDAY1' "
                                   "AND system_id = (SELECT system_id FROM _measure.system WHERE system_name = %s)",
                                   (SYSTEM,)).fetchone()
    assert [d["type"] for d in contab["descriptors"]] == ["CPU", "DISC", "LINE", "PROCESS", "USERDEF"]
    assert [c["name"] for c in contab["counters"]] == ["RESP-TIME", "THROUGHPUT"]
    assert "INTERVAL 1 HOURS" in source
    # INFO reads interval records and entity types: through the measure.* views as measure_api
    info = post(client, write_headers, "INFO CPLNDAY1").json()["output"]
    assert "\nADD COUNTER RESP-TIME, PROCESS $PROGS.SERVER1.*, QUEUE\n" in info
    r = post(client, write_headers, "STOP MEASUREMENT CPLNDAY1")  # measure.stop_measurement
    assert r.status_code == 200 and "Measurement CPLNDAY1 (id " in r.json()["output"], r.text
    with psycopg.connect(api_db_url) as c:
        stop_at = c.execute("SELECT stop_at FROM _measure.measurement WHERE name = 'CPLNDAY1' AND system_id = "
                            "(SELECT system_id FROM _measure.system WHERE system_name = %s)", (SYSTEM,)).fetchone()[0]
    assert stop_at <= datetime.now(UTC)  # the collector stops it at its next poll


def test_syntax_error_is_422_with_its_place(client, write_headers, api_db_url, system):
    before = measurements(api_db_url)
    r = post(client, write_headers, "ADD CPU *\nSTART MEASUREMENT SYN1\nADD CPU 16\n")
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "MeascomSyntax"
    assert (body["line"], body["column"], body["word"]) == (3, 9, "16")
    assert body["detail"] == "line 3, column 9: 16 is out of range; expected a CPU number 0-15 or *"
    assert isinstance(body["expected"], list) and body["expected"]
    assert measurements(api_db_url) == before
    r = post(client, write_headers, "AD CPU *")  # abbreviations: interactive only
    assert r.status_code == 422
    assert post(client, write_headers, "AD CPU *\nSTART MEASUREMENT ABB1", interactive=True).status_code == 200


def test_refused_command_is_409_and_changes_nothing(client, write_headers, api_db_url, system):
    before = measurements(api_db_url)
    r = post(client, write_headers, "ADD CPU *\nSTART MEASUREMENT TWICE\nSTART MEASUREMENT TWICE")
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["error"] == "MeascomRefused" and (body["line"], body["column"]) == (3, 1)
    assert "measurement TWICE is already scheduled" in body["detail"]
    assert measurements(api_db_url) == before


def test_files_and_systems(client, write_headers, system):
    for text, word in (("OBEY cplnday", "OBEY"), ("OUT listing", "OUT"), ("INFO /OUT x/ CPLNDAY1", "/OUT/")):
        r = post(client, write_headers, text)
        assert (r.status_code, r.json()["word"]) == (422, word), r.text
        assert "not available over the API" in r.json()["detail"]
    r = client.post("/meascom", json={"text": "HELP", "system": "\\NOWHERE"}, headers=write_headers)
    assert (r.status_code, r.json()["field"]) == (422, "system")
    assert "unknown system" in r.json()["detail"]
    r = client.post("/meascom", json={"text": "HELP"}, headers=write_headers)  # the only system
    assert r.status_code == 200, r.text


def test_token_scopes(client, read_headers, write_headers, system):
    r = client.post("/meascom", json={"text": "HELP", "system": SYSTEM})
    assert (r.status_code, r.json()["field"]) == (401, "Authorization")
    r = client.post("/meascom", json={"text": "HELP", "system": SYSTEM}, headers=read_headers)
    assert (r.status_code, r.json()["field"]) == (403, "Authorization")
    r = client.post("/meascom", json={"text": "HELP", "system": SYSTEM}, headers=write_headers)
    assert r.status_code == 200 and "MEASCOM commands" in r.json()["output"]


def test_structured_list_goes_through_the_function(client, write_headers, api_db_url, system):
    t0 = datetime(2024, 5, 1, 8, tzinfo=UTC)
    with psycopg.connect(api_db_url) as c:
        sid = c.execute("SELECT system_id FROM _measure.system WHERE system_name = %s", (SYSTEM,)).fetchone()[0]
        mid = c.execute("INSERT INTO _measure.measurement (system_id, name, contab, start_at, stop_at, "
                        "interval_us, state) VALUES (%s, 'STRUC1', '{\"descriptors\": [{\"type\": \"CPU\"}]}', "
                        "%s, %s, 1800000000, 'stopped') RETURNING measurement_id",
                        (sid, t0, t0 + timedelta(hours=1))).fetchone()[0]
        eid = c.execute("INSERT INTO _measure.entity (system_id, type_code, key, ids, cpu, first_seen_at) "
                        "VALUES (%s, 1, 'cpu=2', %s, 2, %s) RETURNING entity_id",
                        (sid, json.dumps({"cpu": 2}), t0)).fetchone()[0]
        for k in range(2):
            counters = [0] * len(CPU.counters)
            counters[CPU.index("cpu_busy_time")] = (k + 1) * 100 * 1_000_000
            c.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, "
                      "to_at, delta_us, closing_kind, system_id, type_code, cpu, counters) "
                      "VALUES (%s, %s, %s, %s, %s, 1800000000, 3, %s, 1, 2, %s)",
                      (mid, eid, t0, t0 + timedelta(minutes=30 * k), t0 + timedelta(minutes=30 * (k + 1)),
                       sid, counters))
    r = post(client, write_headers, "ADD MEASUREMENT STRUC1\nLIST CPU *, LOADID DT12208")
    assert r.status_code == 200, r.text
    assert "1 structured record written, LOADID DT12208" in r.json()["output"]
    with psycopg.connect(api_db_url) as c:
        rows = c.execute("SELECT loadid, entity, entity_id, delta_us, counters[%s] FROM measure.structured_record "
                         "WHERE measurement_id = %s", (CPU.index("cpu_busy_time") + 1, mid)).fetchall()
    assert rows == [("DT12208", "cpu", eid, 3_600_000_000, 300_000_000)]
    # a text LIST reads through collector/measure/read.py and measure.rate, as measure_api
    r = post(client, write_headers, "ADD MEASUREMENT STRUC1\nSET REPORT FORMAT BRIEF\n"
                                    "LIST CPU *, TOTALS INCLUDE, FROM 10:10, FOR 1 HOURS")
    assert r.status_code == 200, r.text
    lines = r.json()["output"].splitlines()[-4:]
    assert lines[0].split() == ["LIST", "CPU", "on", "\\MEASCOM,", "measurement", "STRUC1,", "RATE", "ON"]
    # FROM 10:10 snaps to the copy at 10:00 (Europe/Berlin), the hour ends at 11:00
    assert lines[1].split()[:4] == ["ENTITY", "FROM", "TO", "CPU-BUSY-TIME"]
    assert lines[2].split()[:5] == ["CPU", "2", "10:00:00", "11:00:00", "8.33"]
    assert lines[3].split()[:6] == ["TOTAL", "CPU", "10:00:00", "11:00:00", "8.33", "0.000"]


def test_meascom_cli_against_the_endpoint(client, write_headers, monkeypatch, capsys, system):
    token = write_headers["Authorization"].split()[1]

    def via_client(url, json, headers, timeout):
        return client.post(url.removeprefix("http://api"), json=json, headers=headers)

    monkeypatch.setattr(httpx, "post", via_client)
    assert cli.main(["--api", "http://api", "--token", token, "--system", SYSTEM, "-c", "ADD CPU 99"]) == 2
    assert capsys.readouterr().err == ("meascom: line 1, column 9: 99 is out of range; expected a CPU "
                                       "number 0-15 or *\n")
    assert cli.main(["--api", "http://api", "--token", token, "--system", SYSTEM, "-c",
                     "ADD CPU *\nSTART MEASUREMENT CLI1\nSTART MEASUREMENT CLI1"]) == 1
    assert cli.main(["--api", "http://api", "--token", token, "--system", SYSTEM, "-c", "HELP STOP"]) == 0
    assert "STOP MEASUREMENT name" in capsys.readouterr().out
