"""/admin: platform configuration for admin tokens (measuredb token create NAME --scope admin).

Retention: how long each class of data is kept (raw interval runs, hour, day and month
tiers), purges now or as a dry run, and the log of every purge; the same as
`measuredb retention show|set|run|log`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query

from api.auth import AdminToken
from api.db import SessionDep
from api.errors import Forbidden, InvalidInput, Unauthorized, responses
from api.retention import service
from api.retention.schemas import (
    PurgeLogPage,
    PurgeRead,
    RetentionClass,
    RetentionRead,
    RetentionUpdate,
)

router = APIRouter(prefix="/admin", tags=["admin"])
ADMIN_ERRORS = (Unauthorized, Forbidden)


@router.get("/retention", response_model=RetentionRead, summary="The retention policy and horizons",
            responses=responses(*ADMIN_ERRORS))
def get_retention(session: SessionDep, _: AdminToken) -> RetentionRead:
    return service.show(session)


@router.put("/retention/{retention_class}", response_model=RetentionRead,
            summary="Keep a class of data for a number of days",
            responses=responses(*ADMIN_ERRORS, InvalidInput))
def put_retention(session: SessionDep, _: AdminToken,
                  retention_class: Annotated[RetentionClass, Path(description="raw, hour, day or month")],
                  body: Annotated[RetentionUpdate, Body()]) -> RetentionRead:
    return service.set_keep(session, retention_class, body.keep_days)


@router.post("/retention/run", response_model=PurgeRead, summary="Purge now (or report what would go)",
             responses=responses(*ADMIN_ERRORS))
def run_retention(session: SessionDep, _: AdminToken,
                  dry_run: Annotated[bool, Query(description="report, remove nothing")] = False) -> PurgeRead:
    return service.run(session, dry_run=dry_run)


@router.get("/retention/log", response_model=PurgeLogPage, summary="The last purges, newest first",
            responses=responses(*ADMIN_ERRORS, InvalidInput))
def get_purge_log(session: SessionDep, _: AdminToken,
                  limit: Annotated[int, Query(ge=1, le=1000)] = 20) -> PurgeLogPage:
    return service.log(session, limit)
