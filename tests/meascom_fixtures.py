"""Fixtures of the MEASCOM tests (tests/collector/meascom, tests/cli/test_meascom.py): a database of
their own holding exactly one system, \\DEMO (Europe/Berlin), so `meascom` can pick "the only
system" whatever other tests register."""

from __future__ import annotations

import psycopg
import pytest

from core import schema as schema_runner
from tests.engine import MODE


@pytest.fixture(scope="session")
def url(fresh_database) -> str:
    u = fresh_database("_meascom")
    schema_runner.apply(u, mode=MODE)
    with psycopg.connect(u) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone)"
                  " VALUES ('\\DEMO', 1, 'Europe/Berlin')")
    return u


@pytest.fixture
def db(url):
    """An autocommit connection; control plane and data emptied before each test."""
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("TRUNCATE _measure.measurement, _measure.interval_run, _measure.extra_copy, _measure.entity,"
                  " _measure.structured_record, _measure.control_request,"
                  " _measure.collector_heartbeat")
        yield c
