"""Test fixtures: a real PostgreSQL, built the way production builds it (style P6).

The server is the one named by DATABASE_URL, or else the embedded server under
MEASUREDB_TEST_DATA_DIR (default .data/test, apart from the data of `make run`).
Each xdist worker gets its own fresh database, with schema/ applied by the real runner.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from core import schema as schema_runner
from core.database import drop_database, ensure_database, start_embedded, with_dbname
from tests.engine import MODE, TIMESCALEDB

REPO = Path(__file__).resolve().parents[1]
warnings.filterwarnings("ignore", module="platformdirs")


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """A URL of the test server's maintenance database (server-level work: CREATE DATABASE)."""
    url = os.environ.get("DATABASE_URL")
    if url:
        yield with_dbname(url, "postgres")
        return
    default = REPO / ".data" / ("test-timescaledb" if TIMESCALEDB else "test")
    data_dir = Path(os.environ.get("MEASUREDB_TEST_DATA_DIR", default))
    server = start_embedded(data_dir, dbname="postgres", timescaledb=TIMESCALEDB)
    yield server.admin_url()
    server.stop()


def _worker_dbname(suffix: str = "") -> str:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return f"measuredb_test_{worker}{suffix}"


@pytest.fixture(scope="session")
def fresh_database(pg_admin_url: str):
    """Factory: a new, empty database on the test server; dropped at the end of the session."""
    made: list[str] = []

    def make(suffix: str) -> str:
        name = _worker_dbname(suffix)
        drop_database(pg_admin_url, name)
        ensure_database(pg_admin_url, name)
        made.append(name)
        return with_dbname(pg_admin_url, name)

    yield make
    for name in made:
        drop_database(pg_admin_url, name)


@pytest.fixture(scope="session")
def db_url(fresh_database) -> str:
    """The session's database with schema/ applied (in the suite's mode: tests/engine.py)."""
    url = fresh_database("")
    schema_runner.apply(url, mode=MODE)
    return url


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection]:
    """A connection inside a transaction that is rolled back after the test."""
    with psycopg.connect(db_url) as c:
        yield c
        c.rollback()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if {"db_url", "conn", "pg_admin_url", "fresh_database"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.db)
