"""A database with schema/ applied (plain branch) and a simulated week of \\DASH (simulated.py),
shared by the dashboard tests of this folder; two hours of \\TODAY in another (sql-ipu)."""

from __future__ import annotations

import psycopg
import pytest

from core import schema as schema_runner
from tests.dashboards import simulated
from tests.engine import MODE

# TimescaleDB's time_bucket(interval, timestamptz) for servers without the extension (the
# embedded test server): same origin (Monday 2000-01-03 UTC), so Grafana's TimescaleDB-form
# SQL ($__timeGroup -> time_bucket('3600.000s', t)) runs here exactly as it would there.
TIME_BUCKET_SHIM = """
DO $$
BEGIN
    IF to_regprocedure('time_bucket(interval, timestamp with time zone)') IS NULL THEN
        CREATE FUNCTION public.time_bucket(bucket_width interval, ts timestamptz)
        RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE
        RETURN date_bin(bucket_width, ts, TIMESTAMPTZ '2000-01-03 00:00:00+00');
    END IF;
END
$$;
"""


# The week has no week before it to learn a baseline from (schema/idempotent/060-analysis.sql):
# a week before it at half the load, stored as learned values only, then the week judged
# against it, so that the exceptions dashboard and alert have exceptions to show.
PRIOR_WEEK = """
INSERT INTO _measure.hour_baseline (system_id, hour_at, entity, subject, item, value, holiday, weeks)
SELECT b.system_id, ((b.hour_at AT TIME ZONE y.time_zone) - INTERVAL '7 days') AT TIME ZONE y.time_zone,
       b.entity, b.subject, b.item, b.value / 2, false, 0
  FROM _measure.hour_baseline b JOIN _measure.system y USING (system_id);
SELECT _measure.condense_analysis(y.system_id, ARRAY(
    SELECT DISTINCT h.hour_at FROM _measure.cpu_hour h WHERE h.system_id = y.system_id ORDER BY 1))
  FROM _measure.system y;
"""


def empty_database(fresh_database, suffix: str) -> str:
    """A new database with schema/ applied and the time_bucket shim."""
    url = fresh_database(suffix)
    schema_runner.apply(url, mode=MODE)
    with psycopg.connect(url) as conn:
        conn.execute(TIME_BUCKET_SHIM)
    return url


@pytest.fixture(scope="session")
def dash_db(fresh_database, tmp_path_factory) -> str:
    url = empty_database(fresh_database, "_dash")
    simulated.populate(url, tmp_path_factory.mktemp("dash-collector"))
    with psycopg.connect(url) as conn:
        conn.execute(PRIOR_WEEK)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return url


@pytest.fixture(scope="session")
def today_dash_db(fresh_database, tmp_path_factory) -> str:
    """Two hours of \\TODAY (simulated.populate_today) for the sql-ipu dashboard."""
    url = empty_database(fresh_database, "_dash_today")
    simulated.populate_today(url, tmp_path_factory.mktemp("dash-today-collector"))
    return url


def read_only(url: str):
    """A connection acting as Grafana does: role measure_reader, read-only transactions."""
    with psycopg.connect(url) as conn:
        conn.execute("SET ROLE measure_reader")
        conn.execute("SET default_transaction_read_only = on")
        conn.commit()
        yield conn
        conn.rollback()


@pytest.fixture
def reader(dash_db: str):
    yield from read_only(dash_db)


@pytest.fixture
def today_reader(today_dash_db: str):
    yield from read_only(today_dash_db)
