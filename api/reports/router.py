from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from api.auth import ReadToken
from api.db import SessionDep
from api.errors import Conflict, InvalidInput, NotFound, Unauthorized, responses
from api.reports import service
from api.reports.schemas import (
    Format,
    ReportDefinitionList,
    ReportRunDetail,
    ReportRunPage,
    RunStatus,
)

router = APIRouter(prefix="/reports", tags=["reports"])
RunId = Annotated[int, Path(ge=1, le=9_223_372_036_854_775_807, description="report run id")]
MEDIA = {"text": "text/plain; charset=utf-8", "csv": "text/csv; charset=utf-8",
         "json": "application/json"}


@router.get("/definitions", response_model=ReportDefinitionList,
            summary="Scheduled reports (the 1986 OBEY files): report, parameters, cron schedule",
            responses=responses(Unauthorized))
def list_definitions(session: SessionDep, _: ReadToken) -> ReportDefinitionList:
    return service.definitions(session)


@router.get("/runs", response_model=ReportRunPage, summary="Runs of scheduled reports, newest first",
            responses=responses(Unauthorized, InvalidInput))
def list_runs(
    session: SessionDep, _: ReadToken,
    definition: Annotated[str | None, Query(max_length=64, description="definition name")] = None,
    report: Annotated[str | None, Query(max_length=64, description="report name (queries/)")] = None,
    system: Annotated[str | None, Query(max_length=16, description="system name, e.g. \\DEMO")] = None,
    status: Annotated[RunStatus | None, Query()] = None,
    slot_from: Annotated[datetime | None, Query(description="slots at or after this instant")] = None,
    slot_to: Annotated[datetime | None, Query(description="slots before this instant")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: Annotated[str | None, Query(max_length=32)] = None,
) -> ReportRunPage:
    return service.list_runs(session, definition=definition, report=report, system=system, status=status,
                             slot_from=slot_from, slot_to=slot_to, limit=limit, cursor=cursor)


@router.get("/runs/{run_id}", response_model=ReportRunDetail,
            summary="One run with its output in the requested format",
            responses=responses(Unauthorized, NotFound))
def get_run(session: SessionDep, _: ReadToken, run_id: RunId,
            format: Annotated[Format, Query(description="text (ENFORM layout), csv or json")] = "text",
            ) -> ReportRunDetail:
    return service.get_run(session, run_id, format)


@router.get("/runs/{run_id}/output", response_class=Response,
            summary="A run's output as a file (text/plain, text/csv or application/json)",
            responses={200: {"description": "the output", "content": {
                "text/plain": {"schema": {"type": "string"}},
                "text/csv": {"schema": {"type": "string"}},
                "application/json": {"schema": {"type": "array", "items": {"type": "object"}}}}},
                **responses(Unauthorized, NotFound, Conflict)})
def get_run_output(session: SessionDep, _: ReadToken, run_id: RunId,
                   format: Annotated[Format, Query(description="text, csv or json")] = "text",
                   ) -> Response:
    body = service.run_output(session, run_id, format)
    return Response(content=body, media_type=MEDIA[format])
