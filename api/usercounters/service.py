"""MEASCOUNTERBUMPINIT / MEASCOUNTERBUMP through the running collector.

Contract with the collector (control_request):

* ``bump_init`` payload ``{"ids": {"cpu": 2, "pin": 45, "name": "REQUESTS", "index": 0,
  "process_name": "$APP1", "program_file_name": "$PROGS.SERVER1.APP"}}`` (the last two
  optional: they are what USERDEF descriptors match);
  response ``{"offset": <int>}`` (−1 when no active measurement has the counter).
* ``bump`` payload ``{"ids": {…as above…}, "offset": <int or null>, "op": "INC"|"ADD"|"SETBUSY"|
  "RESETBUSY"|"INCQUEUE"|"DEQUEUE", "value": <int>}``; response ``{"bumped": <bool>}``.
"""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from api.control import call_collector, resolve_system
from api.errors import InvalidInput
from api.usercounters.schemas import (
    BumpCreate,
    BumpInitCreate,
    BumpInitRead,
    BumpRead,
    UserCounterRef,
)


def _ids(ref: UserCounterRef) -> dict:
    ids = {"cpu": ref.cpu, "pin": ref.pin, "name": ref.name.upper(), "index": ref.index}
    for extra in ("process_name", "program_file_name"):
        if getattr(ref, extra):
            ids[extra] = getattr(ref, extra).upper()
    return ids


def bump_init(session: Session, engine: Engine, body: BumpInitCreate, *, timeout: float) -> BumpInitRead:
    system = resolve_system(session, body.system)
    answer = call_collector(engine, system.system_id, "bump_init", {"ids": _ids(body)}, timeout=timeout)
    try:
        return BumpInitRead(offset=int(answer["offset"]))
    except (KeyError, TypeError, ValueError):
        raise InvalidInput("the collector's bump_init answer is malformed") from None


def bump(session: Session, engine: Engine, body: BumpCreate, *, timeout: float) -> BumpRead:
    system = resolve_system(session, body.system)
    payload = {"ids": _ids(body), "offset": body.offset, "op": body.op, "value": body.value}
    answer = call_collector(engine, system.system_id, "bump", payload, timeout=timeout)
    return BumpRead(bumped=bool(answer.get("bumped", False)))
