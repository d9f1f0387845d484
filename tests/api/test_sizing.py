"""Workers, database pool and threads follow the machine and the database's connection budget
unless the settings name them (api/sizing.py); the served protocol's keep-alive guard
(api/serve.py)."""

from __future__ import annotations

import logging
import os
import socket

import anyio.to_thread
import psycopg
import pytest

from api.main import sized
from api.serve import LOG_CONFIG, _Quiet, _unread_bytes
from api.settings import ApiSettings
from api.sizing import OTHER_CONNECTIONS, Sizing, cpu_count, database_budget, plan
from tests.api.conftest import make_client


@pytest.mark.parametrize(("cpus", "budget", "given", "expected"), [
    # 2 cores, PostgreSQL's defaults: (100 - 3 - 10 - 2) // 2 = 42 connections a worker, pool at most 10
    (2, (100, 3), {}, (2, 10, 20)),
    (1, (100, 3), {}, (1, 10, 20)),
    (16, (100, 3), {}, (4, 10, 20)),                      # at most 4 workers
    (4, (40, 3), {}, (4, 2, 4)),                           # (40 - 3 - 10 - 4) // 4 = 5: pool 2 (+2)
    (8, (20, 3), {}, (4, 1, 4)),                           # no budget left: one connection, 4 threads
    (2, (100, 3), {"workers": 3}, (3, 10, 20)),
    (2, (100, 3), {"pool_size": 4}, (2, 4, 8)),            # threads follow the pool
    (2, (100, 3), {"workers": 1, "pool_size": 2, "threads": 50}, (1, 2, 50)),  # as given
    (2, None, {}, (2, 10, 20)),                            # the database could not be asked: 100, 3
])
def test_the_plan(cpus: int, budget: tuple[int, int] | None, given: dict, expected: tuple[int, int, int]) -> None:
    s = plan(cpus=cpus, budget=budget, **given)
    assert (s.workers, s.pool_size, s.threads) == expected
    assert s.asked is (budget is not None)
    assert (s.max_connections, s.reserved) == (budget or (100, 3))


def test_what_the_api_says_at_start_and_when_it_is_over_budget() -> None:
    s = plan(cpus=2, budget=(100, 3))
    assert s.describe() == ("API: 2 workers, each with 10 database connections (+10 when busy) and 20 threads; "
                            "the database allows 100 connections (3 reserved)")
    assert not s.over_budget()
    one = plan(cpus=1, budget=None, pool_size=1)
    assert one.describe() == ("API: 1 worker, each with 1 database connection (+1 when busy) and 4 threads; "
                              "the database allows 100 connections (3 reserved, assumed: the database did not say)")
    # 8 workers x (2 x 10 + 1 LISTEN) = 168 > 100 - 3 - 10
    assert plan(cpus=2, budget=(100, 3), workers=8, pool_size=10).over_budget()
    assert not plan(cpus=2, budget=(100, 3), workers=8).over_budget()  # the pool follows: 4 each
    assert 100 - 3 - OTHER_CONNECTIONS == 87
    assert not Sizing(workers=1, pool_size=43, threads=1, max_connections=100, reserved=3, asked=True).over_budget()
    assert Sizing(workers=1, pool_size=44, threads=1, max_connections=100, reserved=3, asked=True).over_budget()


def test_cpu_count_is_the_affinity() -> None:
    assert cpu_count() == len(os.sched_getaffinity(0))


def test_the_database_budget_is_asked(api_db_url: str) -> None:
    with psycopg.connect(api_db_url) as c:
        expected = c.execute("SELECT current_setting('max_connections')::int, "
                             "current_setting('superuser_reserved_connections')::int "
                             "+ coalesce(current_setting('reserved_connections', true)::int, 0)").fetchone()
    assert database_budget(api_db_url) == tuple(expected)
    assert database_budget("postgresql://u@127.0.0.1:1/measuredb") is None  # nothing listens there


def test_unset_sizes_are_filled_given_ones_kept(api_db_url: str) -> None:
    budget = database_budget(api_db_url)
    auto = sized(ApiSettings(), api_db_url)
    expected = plan(cpus=cpu_count(), budget=budget)
    assert (auto.workers, auto.pool_size, auto.threads) == (expected.workers, expected.pool_size, expected.threads)
    given = ApiSettings(workers=1, pool_size=3, threads=5)
    assert sized(given, "postgresql://u@127.0.0.1:1/never-asked") is given


def test_the_app_runs_its_endpoints_on_as_many_threads_as_set(api_db_url: str) -> None:
    async def tokens() -> float:
        return anyio.to_thread.current_default_thread_limiter().total_tokens

    with make_client(api_db_url, pool_size=2, threads=3) as c:
        assert c.portal.call(tokens) == 3
        assert c.app.state.settings.threads == 3
        assert c.app.state.engine.pool.size() == 2
    with make_client(api_db_url, pool_size=2) as c:
        assert c.portal.call(tokens) == 4   # twice the pool
        assert c.get("/measurements").status_code == 200


def test_unread_bytes_of_a_connection() -> None:
    class Transport:
        def __init__(self, sock: socket.socket | None) -> None:
            self.sock = sock

        def get_extra_info(self, name: str) -> socket.socket | None:
            assert name == "socket"
            return self.sock

    a, b = socket.socketpair()
    with a, b:
        assert _unread_bytes(Transport(a)) == 0
        b.sendall(b"GET / ")
        for _ in range(100):
            if _unread_bytes(Transport(a)):
                break
        assert _unread_bytes(Transport(a)) == 6
    assert _unread_bytes(Transport(a)) == 0   # closed: unknown, 0
    assert _unread_bytes(Transport(None)) == 0


def test_the_log_keeps_uvicorns_chatter_out_and_the_supervisor_in() -> None:
    def record(name: str, level: int, message: str) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, message, None, None)

    quiet = _Quiet()
    assert not quiet.filter(record("uvicorn.error", logging.INFO, "Waiting for application startup."))
    assert quiet.filter(record("uvicorn.error", logging.INFO, "Child process [42] died"))
    assert quiet.filter(record("uvicorn.error", logging.WARNING, "Invalid HTTP request received."))
    assert quiet.filter(record("api.serve", logging.INFO, "closed the keep-alive connection of …"))
    assert LOG_CONFIG["loggers"]["uvicorn.access"]["level"] == "WARNING"
