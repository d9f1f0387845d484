from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from fastapi import APIRouter, Path, Query, Response

from api.auth import ReadToken
from api.cache import Cacheable
from api.contract import Instant
from api.db import SessionDep
from api.errors import Conflict, InvalidInput, NotFound, Unauthorized, responses
from api.patterns import DAY, RUN_CURSOR, worded
from api.reports import service
from api.reports.schemas import (
    Format,
    ReportDefinitionList,
    ReportRunDetail,
    ReportRunPage,
    RunStatus,
)
from core.reports import REPORTS

router = APIRouter(prefix="/reports", tags=["reports"])
RunId = Annotated[int, Path(ge=1, le=9_223_372_036_854_775_807, description="report run id")]
MEDIA = {"text": "text/plain; charset=utf-8", "csv": "text/csv; charset=utf-8",
         "json": "application/json"}


@router.get("/definitions", response_model=ReportDefinitionList,
            summary="Scheduled reports (the 1986 OBEY files): report, parameters, cron schedule",
            dependencies=[Cacheable],
            responses=responses(Unauthorized))
def list_definitions(session: SessionDep, _: ReadToken) -> ReportDefinitionList:
    return service.definitions(session)


@router.get("/runs", response_model=ReportRunPage, summary="Runs of scheduled reports, newest first",
            dependencies=[Cacheable],
            responses=responses(Unauthorized, InvalidInput))
def list_runs(
    session: SessionDep, _: ReadToken,
    definition: Annotated[str | None, Query(max_length=64, description="definition name")] = None,
    report: Annotated[str | None, Query(max_length=64, description="report name (queries/)")] = None,
    system: Annotated[str | None, Query(max_length=16, description="system name, e.g. \\DEMO")] = None,
    status: Annotated[RunStatus | None, Query()] = None,
    slot_from: Annotated[Instant | None, Query(description="slots at or after this instant")] = None,
    slot_to: Annotated[Instant | None, Query(description="slots before this instant")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: Annotated[str | None, Query(pattern=RUN_CURSOR,
                                        description="next_cursor of the previous page")] = None,
) -> ReportRunPage:
    return service.list_runs(session, definition=definition, report=report, system=system, status=status,
                             slot_from=slot_from, slot_to=slot_to, limit=limit, cursor=cursor)


@router.get("/runs/{run_id}", response_model=ReportRunDetail,
            summary="One run with its output in the requested format", dependencies=[Cacheable],
            responses=responses(Unauthorized, NotFound))
def get_run(session: SessionDep, _: ReadToken, run_id: RunId,
            format: Annotated[Format, Query(description="text (ENFORM layout), csv or json")] = "text",
            ) -> ReportRunDetail:
    return service.get_run(session, run_id, format)


@router.get("/runs/{run_id}/output", response_class=Response,
            summary="A run's output as a file (text/plain, text/csv or application/json)",
            dependencies=[Cacheable],
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


if TYPE_CHECKING:  # the reports of queries/, a str to the type checker
    ReportName = str
else:
    ReportName = Literal[tuple(sorted(REPORTS))]
DAY_OR_INSTANT = worded(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"
                        r"([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?$",
                        "a date (2026-11-17) or an ISO 8601 date-time (2026-11-17T10:00+01:00; without an "
                        "offset: the system's local time)")


@router.get("/{report}", response_class=Response,
            summary="Run an ENFORM-style report now: ENFORM text, CSV or JSON rows",
            dependencies=[Cacheable],
            description="The reports of queries/ (threshold, cpu-trend, process-summary, …) with "
                        "their parameters; `date` for one-day reports, `from`/`to` for ranges. A range "
                        "in which the system has no measured hour is told apart from an empty "
                        "answer: the header X-Report-Data is `none` (else `yes`) and the text format "
                        "says NO DATA instead of the report's empty line.",
            responses={200: {"description": "the report", "headers": {"X-Report-Data": {
                "description": "yes: the system has measured hours in the range; none: it has none",
                "schema": {"type": "string", "enum": ["yes", "none"]}}}, "content": {
                "text/plain": {"schema": {"type": "string"}},
                "text/csv": {"schema": {"type": "string"}},
                "application/json": {"schema": {"type": "array", "items": {"type": "object"}}}}},
                **responses(Unauthorized, NotFound, InvalidInput)})
def run_report(
    session: SessionDep, _: ReadToken,
    report: Annotated[ReportName, Path(description="report name (queries/<report>.sql)")],
    system: Annotated[str | None, Query(max_length=16, description="system, e.g. \\DEMO")] = None,
    date: Annotated[str | None, Query(pattern=DAY, description="the (shift) day, YYYY-MM-DD")] = None,
    from_: Annotated[str | None, Query(alias="from", pattern=DAY_OR_INSTANT,
                                       description="first day or instant")] = None,
    to: Annotated[str | None, Query(pattern=DAY_OR_INSTANT,
                                    description="last day (inclusive) or end instant")] = None,
    shift: Annotated[int | None, Query(ge=1, le=24)] = None,
    cpu: Annotated[int | None, Query(ge=0, le=15)] = None,
    pin: Annotated[int | None, Query(ge=0, le=65535)] = None,
    measurement: Annotated[int | None, Query(ge=1, le=2_147_483_647)] = None,
    capacity: Annotated[float | None, Query(gt=0, le=100)] = None,
    severity: Annotated[Literal["minor", "major"] | None,
                        Query(description="exceptions: minor (all, the default) or major")] = None,
    top: Annotated[int | None, Query(ge=1, le=1000, description="sql-statements: how many statements (20)")] = None,
    format: Annotated[Format, Query(description="text (ENFORM layout), csv or json")] = "json",
) -> Response:
    body, has_data = service.run_report(session, report, system=system, day=date, date_from=from_, date_to=to,
                                        shift=shift, extra={"cpu": cpu, "pin": pin, "measurement": measurement,
                                                            "capacity": capacity, "severity": severity,
                                                            "top": top},
                                        fmt=format)
    # whether the system has measured data in the range: an empty report of a range without
    # any is no data, not "nothing found" (the text format says NO DATA)
    return Response(content=body, media_type=MEDIA[format],
                    headers={"X-Report-Data": "yes" if has_data else "none"})
