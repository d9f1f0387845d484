"""The API's database engine and the one dependency that owns a session (style P7).

Reads (GET) get a session on an autocommit connection: each statement is its own snapshot and
no BEGIN / COMMIT round trips are spent on them (a read endpoint changes nothing; the one
write a read may cause, measure.token_scope recording a token's use, commits by itself).
Every other method gets a transaction, committed when the endpoint returns.

Connections are checked for life when taken from the pool without a round trip
(:func:`_alive`: whatever the server sent while the connection sat in the pool is read, and a
connection the server closed is replaced); a connection that breaks in use is dropped from
the pool and the request answered 503 (api/errors.py).
"""

from __future__ import annotations

import select
from collections.abc import AsyncIterator
from typing import Annotated

import psycopg
from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Engine, create_engine, event, exc
from sqlalchemy.orm import Session
from sqlalchemy.pool import PoolProxiedConnection

from core.database import sqlalchemy_url


def _alive(dbapi_conn, _record, _proxy) -> None:
    """Pool checkout: raise DisconnectionError (the pool then connects anew) for a connection
    the server has closed. Whatever the server sent while the connection sat in the pool is
    read without blocking (a terminated backend sends an error, then closes: reading on
    reaches the end of the stream and fails)."""
    if dbapi_conn.closed or dbapi_conn.broken:
        raise exc.DisconnectionError("connection closed")
    pg = dbapi_conn.pgconn
    try:
        for _ in range(4):
            if not select.select([pg.socket], [], [], 0)[0]:
                break
            pg.consume_input()
    except (psycopg.OperationalError, OSError) as e:
        raise exc.DisconnectionError(str(e)) from None
    if pg.status != psycopg.pq.ConnStatus.OK:
        raise exc.DisconnectionError("connection lost")


def build_engine(url: str, *, role: str, pool_size: int, pool_timeout: float = 10.0) -> Engine:
    """The pool: a connection is made within 5 s (connect_timeout) and waited for at most
    `pool_timeout` when every one is in use; either failing is a 503 (api/errors.py)."""
    engine = create_engine(
        sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_timeout=pool_timeout,
        connect_args={"connect_timeout": 5, "application_name": "measuredb-api"},
    )
    event.listen(engine, "checkout", _alive)
    if role:
        # Least privilege even on the embedded server (where we log in as its superuser):
        # every API connection runs as the measure_api role.
        @event.listens_for(engine, "connect")
        def _set_role(dbapi_conn, _record):
            with dbapi_conn.cursor() as cur:
                cur.execute(f'SET ROLE "{role}"')  # role is validated by ApiSettings' pattern
            dbapi_conn.commit()

    return engine


async def get_session(request: Request) -> AsyncIterator[Session]:
    """A session for the request. Making one does no I/O (it connects on first use), so this
    runs on the event loop; so does closing a GET's session (autocommit: nothing to commit).
    Other methods commit in the threadpool."""
    if request.method == "GET":
        session = Session(read_engine(request))
        try:
            yield session
        finally:
            session.close()
        return
    session = Session(request.app.state.engine)
    try:
        yield session
        await run_in_threadpool(session.commit)
    finally:
        await run_in_threadpool(session.close)


def read_engine(request: Request) -> Engine:
    """The app's engine in autocommit (same pool), made once per engine."""
    state = request.app.state
    engine: Engine = state.engine
    if getattr(state, "read_engine_of", None) is not engine:
        state.read_engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        state.read_engine_of = engine
    return state.read_engine


SessionDep = Annotated[Session, Depends(get_session)]


def psycopg_connection(session: Session) -> psycopg.Connection:
    """The psycopg connection under a session (for the plain-function libraries such as
    collector.measure.read): in the session's transaction, or autocommit for a GET."""
    return driver(session.connection().connection)


def driver(raw: PoolProxiedConnection) -> psycopg.Connection:
    """The psycopg connection of a pooled one (SQLAlchemy types it Optional: it is None only
    once the pooled connection is closed)."""
    conn = raw.driver_connection
    assert conn is not None, "a pooled connection used after it was closed"
    return conn
