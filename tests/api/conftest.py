"""API test fixtures: a database of their own (the API tests commit), tokens, a client and a
fake collector.

The fake collector is a thread that answers pending _measure.control_request rows with a
handler the test installs (kind, payload) -> response dict, or raises FakeError(code, text) to
answer with an error. It stands in for the real collector in unit tests; the end-to-end test
with the real collector lives elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import ApiSettings
from core import schema as schema_runner
from tests.api.fakes import FakeCollector
from tests.engine import MODE
from tests.tokens import create_token

SYSTEM = "\\APIT"


@pytest.fixture(scope="session")
def api_db_url(fresh_database) -> str:
    url = fresh_database("_api")
    schema_runner.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                  "VALUES (%s, 3, 'Europe/Berlin')", (SYSTEM,))
    return url


@pytest.fixture(scope="session")
def system_id(api_db_url: str) -> int:
    with psycopg.connect(api_db_url) as c:
        return c.execute("SELECT system_id FROM _measure.system WHERE system_name = %s", (SYSTEM,)).fetchone()[0]


@pytest.fixture(scope="session")
def tokens(api_db_url: str) -> dict[str, str]:
    return {"read": create_token(api_db_url, "test-read", "read"),
            "write": create_token(api_db_url, "test-write", "write")}


@pytest.fixture(scope="session")
def write_headers(tokens) -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens['write']}"}


@pytest.fixture(scope="session")
def read_headers(tokens) -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens['read']}"}


def make_client(url: str, **settings: Any) -> TestClient:
    """A client of a new app; the anonymous rate limit and the failed-authentication limit are
    off unless asked for (test_contract, test_auth)."""
    settings = {"control_timeout_seconds": 0.5, "anonymous_rate_per_second": 0,
                "auth_failure_burst": 1_000_000, **settings}
    return TestClient(create_app(ApiSettings(**settings), database_url=url))


@pytest.fixture(scope="session")
def client(api_db_url: str) -> Iterator[TestClient]:
    with make_client(api_db_url) as c:
        yield c


@pytest.fixture
def fake_collector(api_db_url: str) -> Iterator[FakeCollector]:
    with psycopg.connect(api_db_url) as c:  # requests left by earlier tests stay unanswered
        c.execute("UPDATE _measure.control_request SET answered_at = now(), error_code = 'unavailable', error = 'stale' "
                  "WHERE answered_at IS NULL")
    with FakeCollector(api_db_url) as fc:
        yield fc
