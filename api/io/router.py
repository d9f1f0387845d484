"""POST /import (interval records from CSV, write token) and GET /export (interval records or a
tier as CSV, streamed): the same as `measuredb import` and `measuredb export`
(core/importer.py, core/exporter.py; README "Bring your own data")."""

from __future__ import annotations

from typing import Annotated

import anyio.from_thread
from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse

from api.auth import ReadToken, WriteToken
from api.contract import Instant
from api.db import SessionDep
from api.errors import (
    ErrorRead,
    Forbidden,
    InvalidInput,
    NotFound,
    Unauthorized,
    Unavailable,
    responses,
)
from api.io import service
from api.io.schemas import ExportEntity, ExportKind, ImportFailedRead, ImportRead, TimeFormat
from api.patterns import MEASUREMENT
from core.catalog import load_catalog

router = APIRouter(tags=["import and export"])
INTERVAL = ExportKind("interval")  # the default kind of an export
TIERED = load_catalog().tiered_names

CSV_BODY = {"requestBody": {"required": True, "description": (
    "CSV, UTF-8, header first: SYSTEM, the entity type's identifying fields (CPU, PIN, "
    "PROCESS-NAME …), FROM-TIMESTAMP, TO-TIMESTAMP (ISO 8601 with UTC offset or Julian µs), "
    "optional DELTA-TIME, ERROR, MEASUREMENT, (USERDEF) TYPE, then counters by MEASURE name. "
    "May be sent chunked (Transfer-Encoding: chunked): it is read as it arrives."),
    "content": {"text/csv": {"schema": {"type": "string"},
                             "example": "SYSTEM,CPU,FROM-TIMESTAMP,TO-TIMESTAMP,DELTA-TIME,CPU-BUSY-TIME\n"
                                        "\\DEMO,0,2026-03-02T09:00:00-05:00,2026-03-02T09:01:00-05:00,"
                                        "60000000,30000000\n"}}}}


class CSVStream(StreamingResponse):
    media_type = "text/csv"


@router.post(
    "/import", response_model=ImportRead, summary="Load interval records from CSV (one transaction)",
    description="The rows are checked, stored as interval runs and their hours condensed (hour, "
                "shift, month and year tiers current on return), all in one transaction. Importing "
                "the same rows again changes nothing; a row that disagrees with stored data is a bad "
                "row, never an overwrite. Any bad row: 422 with every problem (line, field) and "
                "nothing stored. Needs a write token.",
    openapi_extra=CSV_BODY,
    responses={**responses(Unauthorized, Forbidden, Unavailable),
               404: {"model": ErrorRead, "description": "NotFound"},
               413: {"model": ErrorRead, "description": "PayloadTooLarge: a Content-Length over max_body_bytes "
                                                        "(send larger files chunked)"},
               422: {"model": ImportFailedRead, "description": "InvalidInput: bad rows (nothing stored) "
                                                               "or bad parameters"}})
async def import_intervals(
    request: Request, session: SessionDep, _: WriteToken,
    entity: Annotated[str | None, Query(max_length=16, description="entity type (CPU, DISC, PROCESS …); "
                                                                   "default: the one the header fits")] = None,
    measurement: Annotated[str | None, Query(pattern=MEASUREMENT,
                                             description="measurement of rows without a MEASUREMENT column "
                                                         "(default IMPORT; created, stopped, if missing)")] = None,
    filename: Annotated[str, Query(min_length=1, max_length=200, description="name used in the problems")] = "upload.csv",
    max_problems: Annotated[int, Query(ge=1, le=1000, description="bad rows listed at most")] = 50,
) -> ImportRead:
    stream = request.stream()

    async def next_chunk() -> bytes | None:
        try:
            return await stream.__anext__()
        except StopAsyncIteration:
            return None

    def chunks():
        while (chunk := anyio.from_thread.run(next_chunk)) is not None:
            if chunk:
                yield chunk

    return await run_in_threadpool(service.import_csv, session, chunks(), filename=filename, entity=entity,
                                   measurement=measurement, max_problems=max_problems)


@router.get(
    "/export", response_class=CSVStream, summary="Interval records or a tier as CSV (streamed)",
    description="interval: the interval records of one entity type whose FROM lies in [from, to), "
                "under the header POST /import reads (an export imports back unchanged); hour, shift, "
                "month, year: the rows of measure.<entity>_<tier> (the view's columns) whose buckets "
                "overlap [from, to) (404 for an entity type without tiers). An empty range is a header alone.",
    responses={**responses(Unauthorized, NotFound, InvalidInput),
               200: {"content": {"text/csv": {"schema": {"type": "string"}}},
                     "description": "CSV with a header row"}})
def export_csv(
    request: Request, session: SessionDep, _: ReadToken,
    entity: Annotated[ExportEntity, Query(description=f"entity type (tiers: {', '.join(TIERED)})")],
    tier: Annotated[ExportKind, Query(description="interval (records) or a tier")] = INTERVAL,
    system: Annotated[str | None, Query(max_length=16, description="system, e.g. \\DEMO; default: every system")] = None,
    from_at: Annotated[Instant | None, Query(alias="from", description="start (ISO 8601 with a time zone)")] = None,
    to_at: Annotated[Instant | None, Query(alias="to", description="end (exclusive)")] = None,
    time_format: Annotated[TimeFormat, Query(description="interval records' FROM/TO-TIMESTAMP: iso or julian")] = TimeFormat.iso,
) -> StreamingResponse:
    for name, at in (("from", from_at), ("to", to_at)):
        if at is not None and at.tzinfo is None:
            raise InvalidInput(f"{name} needs a time zone (e.g. 2026-03-01T00:00:00Z)", field=name)
    spec, system_ids = service.prepare_export(session, entity=entity.value, kind=tier.value, system=system)
    name = spec.filename("csv")
    return CSVStream(service.stream_export(request.app.state.engine, spec, system_ids, from_at, to_at,
                                           time_format.value),
                     media_type="text/csv; charset=utf-8",
                     headers={"Content-Disposition": f'attachment; filename="{name}"'})
