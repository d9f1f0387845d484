from __future__ import annotations

from fastapi import APIRouter, Request

from api.auth import WriteToken
from api.db import SessionDep
from api.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    Unauthorized,
    Unavailable,
    responses,
)
from api.usercounters import service as usercounter_service
from api.usercounters.schemas import BumpCreate, BumpInitCreate, BumpInitRead, BumpRead

router = APIRouter(prefix="/usercounters", tags=["user counters"])
ERRORS = responses(Unauthorized, Forbidden, InvalidInput, NotFound, Conflict, Unavailable)


@router.post("/bump-init", response_model=BumpInitRead, summary="MEASCOUNTERBUMPINIT", responses=ERRORS)
def bump_init(request: Request, session: SessionDep, _: WriteToken, body: BumpInitCreate) -> BumpInitRead:
    return usercounter_service.bump_init(session, request.app.state.engine, body,
                                         timeout=request.app.state.settings.control_timeout_seconds)


@router.post("/bump", response_model=BumpRead, summary="MEASCOUNTERBUMP (INC, ADD, SETBUSY, "
             "RESETBUSY, INCQUEUE, DEQUEUE)", responses=ERRORS)
def bump(request: Request, session: SessionDep, _: WriteToken, body: BumpCreate) -> BumpRead:
    return usercounter_service.bump(session, request.app.state.engine, body,
                                    timeout=request.app.state.settings.control_timeout_seconds)
