"""POST /import (CSV, chunked, write token) and GET /export (streamed CSV), run as the API role
(measure_api: it writes only through the SECURITY DEFINER functions of
schema/idempotent/055-import.sql)."""

from __future__ import annotations

import io
from decimal import Decimal

import psycopg
import pytest

from core import schema as schema_runner
from core.exporter import export, plan
from tests.api.conftest import make_client
from tests.engine import MODE
from tests.tokens import create_token

SYSTEM = "\\IOT"
HEADER = "SYSTEM,CPU,FROM-TIMESTAMP,TO-TIMESTAMP,DELTA-TIME,CPU-BUSY-TIME,CPU-QTIME"
ROWS = [f"{SYSTEM},0,2026-05-04T10:00:00+02:00,2026-05-04T10:30:00+02:00,1800000000,900000000,1800000000",
        f"{SYSTEM},0,2026-05-04T10:30:00+02:00,2026-05-04T11:00:00+02:00,1800000000,450000000,0",
        f"{SYSTEM},3,2026-05-04T10:00:00+02:00,2026-05-04T10:30:00+02:00,1800000000,180000000,0"]
CSV = "\n".join([HEADER, *ROWS]) + "\n"


# A database of this module's own (the shared API database must keep exactly one system).
@pytest.fixture(scope="module")
def io_url(fresh_database) -> str:
    url = fresh_database("_io_api")
    schema_runner.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                  "VALUES (%s, 4, 'Europe/Berlin')", (SYSTEM,))
    return url


@pytest.fixture(scope="module")
def headers(io_url: str) -> dict[str, dict[str, str]]:
    return {scope: {"Authorization": f"Bearer {create_token(io_url, f'io-{scope}', scope)}"}
            for scope in ("read", "write")}


@pytest.fixture(scope="module")
def client(io_url: str):
    with make_client(io_url) as c:
        yield c


def chunked(text: str, size: int = 11):
    """The body as a generator: httpx sends it with Transfer-Encoding: chunked."""
    data = text.encode()
    for i in range(0, len(data), size):
        yield data[i:i + size]


def post(client, body, headers, **params):
    return client.post("/import", content=body, params=params,
                       headers={**headers, "Content-Type": "text/csv"})


def stored(url: str) -> tuple:
    with psycopg.connect(url) as c:
        return (c.execute("SELECT count(*), coalesce(sum(n), 0) FROM _measure.interval_run").fetchone(),
                c.execute("SELECT count(*) FROM _measure.measurement").fetchone(),
                c.execute("SELECT count(*) FROM _measure.entity").fetchone(),
                c.execute("SELECT * FROM measure.cpu_hour ORDER BY cpu").fetchall())


def test_import_a_chunked_upload_then_again_changes_nothing(client, headers, io_url) -> None:
    r = post(client, chunked(CSV), headers["write"], filename="cpu.csv")
    assert r.status_code == 200, r.text
    body = r.json()
    assert {k: body[k] for k in ("entity", "rows", "stored", "unchanged", "duplicates", "hours", "systems",
                                 "measurements")} == {
        "entity": "CPU", "rows": 3, "stored": 3, "unchanged": 0, "duplicates": 0, "hours": 1, "systems": [SYSTEM],
        "measurements": ["IMPORT (new)"]}
    assert body["hours_condensed"] >= 1 and "MEM-QTIME" in body["missing_counters"]
    with psycopg.connect(io_url) as c:  # the tiers are current when the answer comes
        assert c.execute("SELECT cpu, samples, busy_avg, busy_max, qlen_avg FROM measure.cpu_hour ORDER BY cpu"
                         ).fetchall() == [(0, 2, Decimal(37.5), Decimal(50), Decimal("0.5")),
                                          (3, 1, Decimal(10), Decimal(10), Decimal(0))]
        assert c.execute("SELECT count(*) FROM _measure.tier_dirty").fetchone() == (0,)
    before = stored(io_url)
    again = post(client, CSV, headers["write"])
    assert again.status_code == 200 and again.json()["stored"] == 0 and again.json()["unchanged"] == 3
    assert stored(io_url) == before


def test_bad_rows_are_422_with_every_problem_and_nothing_stored(client, headers, io_url) -> None:
    post(client, CSV, headers["write"])
    before = stored(io_url)
    bad = "\n".join([HEADER, ROWS[0], f"{SYSTEM},x,{ROWS[1].split(',', 2)[2]}",
                     ROWS[2].replace(",180000000,", ",180000009,"), f"{SYSTEM},4,2026-05-04T11:00:00+02:00,"
                     "2026-05-04T11:30:00+02:00,1800000000,1,zero", "\\OTHER,4,2026-05-04T11:00:00+02:00,"
                     "2026-05-04T11:30:00+02:00,1800000000,1,0", f"{SYSTEM},5,2026-05-04T11:00:00+02:00,"
                     "2026-05-04T11:30:00+02:00,1800000000,1,0"]) + "\n"
    r = post(client, chunked(bad), headers["write"], filename="bad.csv")
    assert r.status_code == 422
    body = r.json()
    assert body["error"] == "InvalidInput" and body["bad_rows"] == 4
    assert body["detail"] == "bad.csv: 4 bad rows; nothing was stored"
    assert [(p["line"], p["field"]) for p in body["problems"]] == [
        (3, "CPU"), (4, "CPU-BUSY-TIME"), (5, "CPU-QTIME"), (6, "SYSTEM")]
    assert body["problems"][1]["problem"] == ("already stored with another value (stored 180000000, file "
                                              "180000009); stored data is never overwritten")
    assert stored(io_url) == before
    # a header the API cannot use, an empty body, text that is no CSV: 422 too
    for text, problem in [("SYSTEM,CPU,FROM-TIMESTAMP,TO-TIMESTAMP,NOPE\n", "not a field of CPU interval records"),
                          ("", "the file is empty"), ("\x00\x01", "NUL")]:
        r = post(client, text, headers["write"], entity="cpu")
        assert r.status_code == 422 and problem in str(r.json()["problems"]), r.text
    assert post(client, CSV, headers["write"], entity="NOSUCH").status_code == 422
    assert stored(io_url) == before


def test_import_needs_a_write_token(client, headers) -> None:
    assert post(client, CSV, {}).status_code == 401
    assert post(client, CSV, headers["read"]).status_code == 403


def test_export_streams_what_the_cli_writes(client, headers, io_url) -> None:
    post(client, CSV, headers["write"])
    with psycopg.connect(io_url) as c:
        sid = c.execute("SELECT system_id FROM measure.system").fetchone()[0]
        expected = {}
        for kind in ("interval", "hour", "shift", "month", "year"):
            buf = io.BytesIO()
            export(c, plan("cpu", kind)[0], buf, system_ids=[sid])
            expected[kind] = buf.getvalue()
    for kind, data in expected.items():
        r = client.get("/export", params={"entity": "cpu", "tier": kind, "system": SYSTEM}, headers=headers["read"])
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
        assert r.headers["content-disposition"] == f'attachment; filename="cpu-{kind}.csv"'
        assert r.content == data, kind
    lines = expected["interval"].decode().splitlines()
    assert lines[1].startswith("\\IOT,IMPORT,0,2026-05-04T10:00:00+02:00,2026-05-04T10:30:00+02:00,1800000000,0,"
                               "900000000,1800000000,")
    # a time range, Julian times, and the export back in changes nothing
    r = client.get("/export", params={"entity": "cpu", "from": "2026-05-04T08:30:00Z", "time_format": "julian"})
    assert r.status_code == 200 and len(r.text.splitlines()) == 2 and ",2126" in r.text
    back = post(client, r.content, headers["write"])
    assert back.status_code == 200 and back.json()["unchanged"] == 1 and back.json()["stored"] == 0
    # errors before the stream starts
    assert client.get("/export", params={"entity": "cpu", "system": "\\NOPE"}).status_code == 404
    r = client.get("/export", params={"entity": "system", "tier": "hour"})  # no such tier
    assert r.status_code == 404 and r.json()["field"] == "tier"
    assert client.get("/export", params={"entity": "cpu", "tier": "week"}).status_code == 422
    assert client.get("/export", params={"entity": "nosuch"}).status_code == 422
    r = client.get("/export", params={"entity": "cpu", "from": "2026-05-04T10:00:00Z", "to": "2026-05-04T09:00:00Z"})
    assert r.status_code == 200 and r.text.count("\n") == 1  # an empty range: the header


def test_an_upload_over_the_body_limit_with_a_content_length(client, headers, io_url) -> None:
    """curl -T and httpx send a file with Content-Length: POST /import takes bodies up to
    max_import_bytes (4 GiB), every other route stays at max_body_bytes (1 MiB)."""
    from datetime import datetime, timedelta

    t0 = datetime.fromisoformat("2026-05-05T04:00:00+02:00")
    minutes = [(t0 + timedelta(minutes=i)).isoformat() for i in range(16 * 60 + 1)]
    lines = [HEADER] + [f"{SYSTEM},{cpu},{minutes[i]},{minutes[i + 1]},60000000,{(cpu * 7 + i % 60) * 100_000},0"
                        for cpu in range(16) for i in range(16 * 60)]
    body = ("\n".join(lines) + "\n").encode()
    assert len(body) > 1_048_576
    r = post(client, body, headers["write"], filename="big.csv")
    assert r.status_code == 200, r.text[:500]
    assert r.json()["stored"] == 16 * 16 * 60
    too_big = client.post("/meascom", content=b"x" * 1_100_000, headers={**headers["write"],
                                                                         "Content-Type": "application/json"})
    assert too_big.status_code == 413


def test_the_api_and_the_command_line_report_the_same_problems(client, headers, io_url, tmp_path, monkeypatch) -> None:
    """The same bad file: the same problems (line, field, words) and the same count from
    POST /import and from `measuredb import`, however the rows are staged."""
    from typer.testing import CliRunner

    from cli.main import app

    bad = "\n".join([HEADER, ROWS[0].replace(",0,", ",17,", 1), ROWS[1].replace("450000000", "x"),
                     ROWS[2].replace(SYSTEM, "\\OTHER"), ROWS[2].replace("180000000", "-1").replace(",3,", ",7,"),
                     ROWS[2].replace(",3,", ",16,").replace("180000000", "y")]) + "\n"
    r = post(client, chunked(bad), headers["write"], filename="same.csv")
    assert r.status_code == 422
    api = r.json()
    path = tmp_path / "same.csv"
    path.write_text(bad)
    monkeypatch.setenv("DATABASE_URL", io_url)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    out = CliRunner().invoke(app, ["import", str(path)])
    assert out.exit_code == 2
    cli = [line.split(": ", 2) for line in out.output.replace(str(path), "same.csv").splitlines()
           if line.startswith("same.csv:") and line.count(":") >= 3 and not line.startswith("same.csv: ")]
    assert [(int(loc.split(":")[1]), fld, msg) for loc, fld, msg in cli] == [
        (p["line"], p["field"], p["problem"]) for p in api["problems"]]
    assert len(api["problems"]) == 7 and api["bad_rows"] == 5
    assert api["detail"] in " ".join(out.output.replace(str(path), "same.csv").split())
