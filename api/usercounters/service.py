"""MEASCOUNTERBUMPINIT / MEASCOUNTERBUMP through the running collector: the ``bump_init`` and
``bump`` control requests (core/control.py: payloads :class:`~core.control.BumpInit` and
:class:`~core.control.Bump`, answers :class:`~core.control.BumpInitAnswer`, the counter's
offset or −1 when no active measurement has it, and :class:`~core.control.BumpAnswer`)."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from api.control import call_collector, resolve_system
from api.usercounters.schemas import (
    BumpCreate,
    BumpInitCreate,
    BumpInitRead,
    BumpRead,
    UserCounterRef,
)
from core import control


def _ids(ref: UserCounterRef) -> control.UserCounterIds:
    return control.UserCounterIds(
        cpu=ref.cpu, pin=ref.pin, name=ref.name.upper(), index=ref.index,
        process_name=ref.process_name.upper() if ref.process_name else None,
        program_file_name=ref.program_file_name.upper() if ref.program_file_name else None)


def bump_init(session: Session, engine: Engine, body: BumpInitCreate, *, timeout: float) -> BumpInitRead:
    system = resolve_system(session, body.system)
    answer = call_collector(engine, system.system_id, control.BumpInit(ids=_ids(body)), timeout=timeout)
    return BumpInitRead(offset=answer.offset)


def bump(session: Session, engine: Engine, body: BumpCreate, *, timeout: float) -> BumpRead:
    system = resolve_system(session, body.system)
    request = control.Bump(ids=_ids(body), offset=body.offset, op=body.op, value=body.value)
    answer = call_collector(engine, system.system_id, request, timeout=timeout)
    return BumpRead(bumped=answer.bumped)
