"""api/db.py: reads run without a transaction, writes in one; a pooled connection the server
closed is replaced when taken from the pool (no round trip spent checking live ones)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from types import SimpleNamespace

import psycopg
from sqlalchemy import text

from tests.api.conftest import make_client


def test_a_connection_the_server_closed_is_replaced_not_a_503(api_db_url) -> None:
    with make_client(api_db_url, pool_size=1, cache_enabled=False) as c:
        assert c.get("/measurements").status_code == 200
        engine = c.app.state.engine
        with engine.connect() as conn:  # the pool's one connection
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        with psycopg.connect(api_db_url, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
            for _ in range(100):  # until the backend is gone
                if not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
                    break
                time.sleep(0.02)
        for _ in range(3):
            r = c.get("/measurements")
            assert r.status_code == 200, r.text
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() != pid


def test_reads_are_autocommit_and_writes_are_one_transaction(api_db_url) -> None:
    from api.db import get_session

    async def session_state(app, method: str) -> tuple[bool, str]:
        sessions = get_session(SimpleNamespace(app=app, method=method))
        session = await sessions.__anext__()
        session.execute(text("SELECT 1"))
        conn = session.connection().connection.driver_connection
        state = (conn.autocommit, conn.info.transaction_status.name)
        with contextlib.suppress(StopAsyncIteration):
            await sessions.__anext__()  # the end of the request: commit (writes), close
        assert conn.info.transaction_status.name == "IDLE"
        return state

    with make_client(api_db_url, cache_enabled=False) as c:
        assert asyncio.run(session_state(c.app, "GET")) == (True, "IDLE")  # no BEGIN, no COMMIT
        assert asyncio.run(session_state(c.app, "POST")) == (False, "INTRANS")


def test_a_pool_with_every_connection_in_use_is_a_503(api_db_url, caplog) -> None:
    """Connection acquisition has a timeout: past it the request is answered 503 (the usual
    body), never held, and the 503 is logged with its reason."""
    with make_client(api_db_url, pool_size=1, pool_timeout_seconds=0.5, cache_enabled=False) as c:
        engine = c.app.state.engine
        held = [engine.connect() for _ in range(2)]  # pool_size + max_overflow
        try:
            r = c.get("/measurements")
            assert r.status_code == 503 and r.json()["error"] == "Unavailable"
            assert "in use" in r.json()["detail"]
            logged = [x.getMessage() for x in caplog.records if x.name == "api.errors"]
            assert logged == ["503 to testclient:50000 for GET /measurements: every database connection of "
                              "this worker is in use; try again shortly"]
        finally:
            for conn in held:
                conn.close()
        assert c.get("/measurements").status_code == 200
