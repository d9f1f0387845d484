"""/admin/retention: the retention policy, purges and their log, for admin tokens only."""

from __future__ import annotations

import psycopg
import pytest

from tests.tokens import create_token


@pytest.fixture(scope="module")
def admin_headers(api_db_url: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(api_db_url, 'test-admin', 'admin')}"}


@pytest.fixture
def policy(api_db_url: str):
    with psycopg.connect(api_db_url) as c:
        before = c.execute("SELECT class, keep FROM _measure.retention ORDER BY ord").fetchall()
    yield
    with psycopg.connect(api_db_url) as c:
        for cls, keep in reversed(before):  # widest first, so that every step is valid
            c.execute("UPDATE _measure.retention SET keep = %s WHERE class = %s", (keep, cls))


def test_retention_needs_an_admin_token(client, read_headers, write_headers) -> None:
    for method, path in (("get", "/admin/retention"), ("put", "/admin/retention/raw"),
                         ("post", "/admin/retention/run"), ("get", "/admin/retention/log")):
        kwargs = {"json": {"keep_days": 35}} if method == "put" else {}
        r = client.request(method, path, **kwargs)
        assert r.status_code == 401 and "admin token" in r.json()["detail"], path
        for headers in (read_headers, write_headers):
            r = client.request(method, path, headers=headers, **kwargs)
            assert r.status_code == 403 and "needs an admin token" in r.json()["detail"], path


def test_show_and_set_the_policy(client, admin_headers, policy) -> None:
    r = client.get("/admin/retention", headers=admin_headers)
    assert r.status_code == 200
    assert [(c["class"], c["keep_days"]) for c in r.json()["classes"]] == [
        ("raw", 35), ("hour", 400), ("day", 1830), ("month", None)]
    r = client.put("/admin/retention/raw", json={"keep_days": 60}, headers=admin_headers)
    assert r.status_code == 200 and r.json()["classes"][0]["keep_days"] == 60
    # each class is kept at least as long as the one below it: a clear error naming the field
    r = client.put("/admin/retention/hour", json={"keep_days": 10}, headers=admin_headers)
    assert r.status_code == 422 and r.json()["field"] == "keep_days"
    assert "at least" in r.json()["detail"]
    r = client.put("/admin/retention/raw", json={"keep_days": None}, headers=admin_headers)
    assert r.status_code == 422 and "cannot be kept for ever" in r.json()["detail"]
    r = client.put("/admin/retention/nosuch", json={"keep_days": 3}, headers=admin_headers)
    assert r.status_code == 422
    r = client.put("/admin/retention/raw", json={"keep_days": 0}, headers=admin_headers)
    assert r.status_code == 422 and r.json()["field"] == "keep_days"


def test_run_dry_and_real_and_the_log(client, admin_headers) -> None:
    dry = client.post("/admin/retention/run", params={"dry_run": "true"}, headers=admin_headers)
    assert dry.status_code == 200 and dry.json()["dry_run"] is True
    real = client.post("/admin/retention/run", headers=admin_headers)
    assert real.status_code == 200 and real.json()["dry_run"] is False
    log = client.get("/admin/retention/log", params={"limit": 2}, headers=admin_headers).json()["items"]
    assert [(x["purge_id"], x["dry_run"], x["requested_by"]) for x in log] == [
        (real.json()["purge_id"], False, "api"), (dry.json()["purge_id"], True, "api")]
