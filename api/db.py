"""The API's database engine and the one dependency that owns a session (style P7)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session

from collector.database import sqlalchemy_url


def build_engine(url: str, *, role: str, pool_size: int) -> Engine:
    engine = create_engine(
        sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        connect_args={"connect_timeout": 5, "application_name": "measuredb-api"},
    )
    if role:
        # Least privilege even on the embedded server (where we log in as its superuser):
        # every API connection runs as the measure_api role.
        @event.listens_for(engine, "connect")
        def _set_role(dbapi_conn, _record):
            with dbapi_conn.cursor() as cur:
                cur.execute(f'SET ROLE "{role}"')  # role is validated by ApiSettings' pattern
            dbapi_conn.commit()

    return engine


def get_session(request: Request) -> Iterator[Session]:
    with Session(request.app.state.engine) as session:
        yield session
        session.commit()


SessionDep = Annotated[Session, Depends(get_session)]


def psycopg_connection(session: Session):
    """The psycopg connection under a session, inside the session's transaction (for the
    plain-function libraries such as collector.measure.read)."""
    return session.connection().connection.driver_connection
