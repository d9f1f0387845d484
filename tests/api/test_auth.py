"""Bearer tokens: every state-changing endpoint needs a write token; reads of stored data need
a token only when MEASUREDB_API_REQUIRE_TOKEN_FOR_READS=true; reads that ask the collector
always need one."""

from __future__ import annotations

import psycopg
import pytest

from tests.api.conftest import make_client
from tests.tokens import create_token

CONTAB = {"descriptors": [{"type": "CPU"}]}
MUTATING = [
    ("POST", "/measurements", {"name": "AUTH1", "contab": CONTAB}),
    ("POST", "/measurements/{mid}/start", None),
    ("POST", "/measurements/{mid}/stop", None),
    ("DELETE", "/measurements/{mid}", None),
    ("POST", "/usercounters/bump-init", {"cpu": 1, "pin": 2, "name": "R"}),
    ("POST", "/usercounters/bump", {"cpu": 1, "pin": 2, "name": "R", "op": "INC"}),
]
READS = ["/measurements", "/measurements/{mid}", "/measurements/{mid}/configuration",
         "/measurements/{mid}/counters/cpu", "/catalog/entities", "/catalog/entities/cpu/counters"]
COLLECTOR_READS = ["/measurements/{mid}/status", "/active/cpu"]


@pytest.fixture(scope="module")
def mid(client, write_headers) -> int:
    r = client.post("/measurements", json={"name": "AUTHM", "contab": CONTAB}, headers=write_headers)
    return r.json()["measurement_id"]


@pytest.mark.parametrize(("method", "path", "body"), MUTATING)
def test_mutating_endpoints_need_a_write_token(client, mid, read_headers, method, path, body):
    url = path.format(mid=mid)
    r = client.request(method, url, json=body)
    assert (r.status_code, r.json()["error"], r.json()["field"]) == (401, "Unauthorized", "Authorization")
    r = client.request(method, url, json=body, headers=read_headers)
    assert (r.status_code, r.json()["error"]) == (403, "Forbidden")
    assert "read-only" in r.json()["detail"]
    r = client.request(method, url, json=body, headers={"Authorization": "Bearer not-a-token"})
    assert r.status_code == 401 and r.json()["detail"] == "the bearer token is unknown or revoked"


@pytest.mark.parametrize(("method", "path", "body"), MUTATING[:1])
def test_write_token_is_accepted(client, write_headers, method, path, body):
    r = client.request(method, path, json=body, headers=write_headers)
    assert r.status_code == 201


def test_delete_with_write_token(client, write_headers):
    mid = client.post("/measurements", json={"name": "AUTHD", "contab": CONTAB}, headers=write_headers).json()
    assert client.delete(f"/measurements/{mid['measurement_id']}", headers=write_headers).status_code == 204


def test_reads_are_open_by_default(client, mid):
    assert client.get(f"/measurements/{mid}").status_code == 200


def test_reads_need_a_token_when_configured(api_db_url, mid, read_headers, write_headers):
    with make_client(api_db_url, require_token_for_reads=True) as c:
        for path in READS:
            url = path.format(mid=mid)
            r = c.get(url)
            assert r.status_code == 401, url
            assert "reads need a token" in r.json()["detail"]
            for headers in (read_headers, write_headers):
                assert c.get(url, headers=headers).status_code == 200, url


def test_reads_that_ask_the_collector_always_need_a_token(client, api_db_url, mid, read_headers):
    with psycopg.connect(api_db_url) as c:
        before = c.execute("SELECT count(*) FROM _measure.control_request").fetchone()[0]
    for path in COLLECTOR_READS:
        r = client.get(path.format(mid=mid))
        assert (r.status_code, r.json()["field"]) == (401, "Authorization"), path
        assert r.json()["detail"].startswith("this read asks the running collector")
        r = client.get(path.format(mid=mid), headers={"Authorization": "Bearer not-a-token"})
        assert r.status_code == 401 and r.json()["detail"] == "the bearer token is unknown or revoked"
    with psycopg.connect(api_db_url) as c:
        assert c.execute("SELECT count(*) FROM _measure.control_request").fetchone()[0] == before


def test_revoked_token_is_refused_and_use_is_recorded(client, api_db_url, mid):
    token = create_token(api_db_url, "short-lived", "write")
    headers = {"Authorization": f"Bearer {token}"}
    assert client.get(f"/measurements/{mid}", headers=headers).status_code == 200
    with psycopg.connect(api_db_url) as c:
        assert c.execute("SELECT last_used_at IS NOT NULL FROM _measure.api_token WHERE name = 'short-lived'"
                         ).fetchone()[0]
        c.execute("UPDATE _measure.api_token SET revoked_at = now() WHERE name = 'short-lived'")
    assert client.get(f"/measurements/{mid}", headers=headers).status_code == 401


def test_only_the_hash_is_stored(api_db_url, tokens):
    with psycopg.connect(api_db_url) as c:
        rows = c.execute("SELECT token_sha256 FROM _measure.api_token").fetchall()
    stored = b"".join(bytes(r[0]) for r in rows)
    assert tokens["write"].encode() not in stored and all(len(bytes(r[0])) == 32 for r in rows)


def test_api_role_cannot_write_storage_directly(client):
    with client.app.state.engine.connect() as c, pytest.raises(Exception, match="permission denied"):
        c.exec_driver_sql("UPDATE _measure.api_token SET scope = 'write'")


def test_failed_authentications_are_throttled_and_logged(api_db_url, tokens, caplog):
    """Guessing tokens: every 401 takes from the address's failure bucket; once it is empty,
    any request with a token from that address is 429 with Retry-After (loopback too), while
    requests without a token are unaffected."""
    bogus = {"Authorization": "Bearer mdb_bogus_bogus"}
    caplog.set_level("WARNING", logger="api.ratelimit")
    with make_client(api_db_url, auth_failure_burst=3, auth_failure_rate_per_second=0.01) as c:
        assert [c.get("/measurements", headers=bogus).status_code for _ in range(3)] == [401] * 3
        limited = c.get("/measurements", headers=bogus)
        assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
        assert limited.json()["error"] == "TooManyRequests" and "failed authentications" in limited.json()["detail"]
        good = c.get("/measurements", headers={"Authorization": f"Bearer {tokens['read']}"})
        assert good.status_code == 429  # the address is throttled, whatever the token
        assert c.get("/measurements").status_code == 200  # anonymous reads: their own limit (off here)
    failed = [r.getMessage() for r in caplog.records if "failed authentication from testclient" in r.getMessage()]
    assert len(failed) == 3 and "throttled now" in failed[-1] and "GET /measurements" in failed[0]


def test_valid_tokens_do_not_use_up_the_failure_bucket(api_db_url, tokens):
    with make_client(api_db_url, auth_failure_burst=2, auth_failure_rate_per_second=0.01) as c:
        headers = {"Authorization": f"Bearer {tokens['read']}"}
        assert {c.get("/measurements", headers=headers).status_code for _ in range(20)} == {200}
