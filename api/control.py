"""The API's side of the control requests (the protocol, its requests, answers and error
codes: core/control.py), and the system a request is for.

:func:`call_collector` submits a request (``measure.submit_request`` NOTIFYs
``measuredb_request``), commits, and waits for the collector's answer: it LISTENs on
``measuredb_answer`` (payload = request id) and re-reads the outcome at least every 250 ms.
No answer within the timeout (ApiSettings.control_timeout_seconds, 5 s) is a 503 naming the
request. An error answer is raised as the API error of its code (not_found 404, invalid 422,
conflict 409, unavailable 503), its message prefixed with ``collector:``; an answer that is
not the kind's is a 503.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import overload

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from api.db import driver
from api.errors import InvalidInput, MeasureError, NotFound, Unavailable, service_error
from core import control
from core.errors import ERROR_OF_KIND


@dataclass(frozen=True)
class SystemRef:
    system_id: int
    system_name: str
    time_zone: str


def resolve_system(session: Session, name: str | None) -> SystemRef:
    """The system named, or the only one in the database."""
    rows = session.execute(text(
        "SELECT s.system_id, s.system_name, s.time_zone FROM measure.system s "
        "WHERE CAST(:n AS text) IS NULL OR s.system_name = upper(CAST(:n AS text)) "
        "ORDER BY s.system_id"), {"n": name}).all()
    if name is not None and not rows:
        raise NotFound(f"unknown system {name!r}", field="system")
    if not rows:
        raise NotFound("the database holds no system yet: start the collector first", field="system")
    if len(rows) > 1:
        raise InvalidInput(f"the database holds {len(rows)} systems "
                           f"({', '.join(r.system_name for r in rows)}); name one", field="system")
    return SystemRef(*rows[0])


def _error(refusal: control.Refusal) -> MeasureError:
    return service_error(ERROR_OF_KIND[refusal.code](f"collector: {refusal.message}"))


@overload
def call_collector(engine: Engine, system_id: int, request: control.ReadActive, *,
                   timeout: float) -> control.ActiveRead: ...
@overload
def call_collector(engine: Engine, system_id: int, request: control.Status, *,
                   timeout: float) -> control.StatusAnswer: ...
@overload
def call_collector(engine: Engine, system_id: int, request: control.BumpInit, *,
                   timeout: float) -> control.BumpInitAnswer: ...
@overload
def call_collector(engine: Engine, system_id: int, request: control.Bump, *,
                   timeout: float) -> control.BumpAnswer: ...


def call_collector(engine: Engine, system_id: int, request: control.Request, *,
                   timeout: float) -> control.Answer:
    """Submit one control request and wait for its answer (of the request's kind); raises
    the typed error."""
    raw = engine.raw_connection()
    try:
        pg = driver(raw)
        pg.execute("LISTEN measuredb_answer")
        request_id = control.submit(pg, system_id, request)
        pg.commit()
        deadline = time.monotonic() + timeout
        while True:
            try:
                result = control.outcome(pg, request_id, request)
            except control.MalformedAnswer as exc:
                raise Unavailable(str(exc)) from None
            pg.commit()
            if isinstance(result, control.Refusal):
                raise _error(result)
            if result is not None:
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Unavailable(
                    f"no collector answered request {request_id} ({request.kind}) within {timeout:g} s: "
                    "is `measuredb collector` running for this system?")
            for note in pg.notifies(timeout=min(remaining, 0.25), stop_after=1):
                if note.payload == str(request_id):
                    break
    finally:
        try:
            driver(raw).execute("UNLISTEN *")
            driver(raw).commit()
        finally:
            raw.close()
