from __future__ import annotations

from fastapi import APIRouter, Request

from api.auth import WriteToken
from api.db import SessionDep
from api.errors import ErrorRead
from api.meascom import service as meascom_service
from api.meascom.schemas import MeascomErrorRead, MeascomOutputRead, MeascomRun

router = APIRouter(tags=["meascom"])


@router.post("/meascom", response_model=MeascomOutputRead,
             summary="Run MEASCOM commands (needs a write token: MEASCOM changes measurements)",
             responses={401: {"model": ErrorRead, "description": "Unauthorized"},
                        403: {"model": ErrorRead, "description": "Forbidden"},
                        409: {"model": MeascomErrorRead, "description": "a command was refused"},
                        422: {"model": MeascomErrorRead, "description": "syntax error or bad system"}})
def run_meascom(request: Request, session: SessionDep, _: WriteToken, body: MeascomRun) -> MeascomOutputRead:
    return meascom_service.run(session, request.app.state.engine, body)
