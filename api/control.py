"""The API→collector request bus (_measure.control_request), and the system a request is for.

:func:`call_collector` inserts a request through ``measure.submit_request`` (which NOTIFYs
``measuredb_request``), commits, and waits for the collector's answer: it LISTENs on
``measuredb_answer`` (payload = request id) and re-reads ``measure.request_answer`` at least
every 250 ms. No answer within the timeout (ApiSettings.control_timeout_seconds, 5 s) is a
503 naming the request.

The collector answers by setting ``response`` (JSON) or ``error`` (text) and ``answered_at``.
Error text may start with ``not_found:`` (→ 404), ``invalid:`` (→ 422) or ``conflict:``
(→ 409); any other text is a 409 quoting the collector.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from api.errors import Conflict, InvalidInput, MeasureError, NotFound, Unavailable


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


def _error(message: str) -> MeasureError:
    code, sep, rest = message.partition(":")
    typed = {"not_found": NotFound, "invalid": InvalidInput, "conflict": Conflict}.get(code.strip())
    if sep and typed is not None:
        return typed(f"collector: {rest.strip()}")
    return Conflict(f"collector: {message}")


def call_collector(engine: Engine, system_id: int, kind: str, payload: dict[str, Any],
                   *, timeout: float) -> dict[str, Any]:
    """Submit one control request and wait for its answer; raises the typed error."""
    raw = engine.raw_connection()
    try:
        pg = raw.driver_connection
        with pg.cursor() as cur:
            cur.execute("LISTEN measuredb_answer")
            cur.execute("SELECT measure.submit_request(%s::smallint, %s, %s::jsonb)",
                        (system_id, kind, json.dumps(payload)))
            request_id = cur.fetchone()[0]
        pg.commit()
        deadline = time.monotonic() + timeout
        while True:
            with pg.cursor() as cur:
                cur.execute("SELECT answered_at, response, error FROM measure.request_answer(%s)",
                            (request_id,))
                row = cur.fetchone()
            pg.commit()
            if row is not None and row[0] is not None:
                if row[2] is not None:
                    raise _error(row[2])
                return row[1] if isinstance(row[1], dict) else {"value": row[1]}
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Unavailable(
                    f"no collector answered request {request_id} ({kind}) within {timeout:g} s: "
                    "is `measuredb collector` running for this system?")
            for note in pg.notifies(timeout=min(remaining, 0.25), stop_after=1):
                if note.payload == str(request_id):
                    break
    finally:
        try:
            with raw.driver_connection.cursor() as cur:
                cur.execute("UNLISTEN *")
            raw.driver_connection.commit()
        finally:
            raw.close()
