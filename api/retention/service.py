"""Retention for admin tokens: the functions of core/retention.py (the same as `measuredb
retention`) in the request's transaction, their answers as the API's shapes."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from api.db import psycopg_connection
from api.retention.schemas import (
    PurgeLogPage,
    PurgeLogRead,
    PurgeRead,
    RetentionClassRead,
    RetentionRead,
)
from core import retention
from core.errors import ServiceError


def show(session: Session) -> RetentionRead:
    rows = retention.show(psycopg_connection(session))
    return RetentionRead(classes=[RetentionClassRead.model_validate({
        "retention_class": r["class"], "keep_days": None if r["keep"] is None else r["keep"].days,
        "cutoff": r["cutoff"], "purged_before": r["purged_before"]}) for r in rows])


def set_keep(session: Session, cls: str, keep_days: int | None) -> RetentionRead:
    try:
        retention.set_keep(psycopg_connection(session), cls, None if keep_days is None else timedelta(days=keep_days))
    except ServiceError as exc:
        if exc.field == "keep":  # the services' name for what the API calls keep_days
            exc.field = "keep_days"
        raise
    session.commit()
    return show(session)


def run(session: Session, *, dry_run: bool) -> PurgeRead:
    result = retention.run(psycopg_connection(session), dry_run=dry_run, requested_by="api")
    session.commit()
    return PurgeRead.model_validate(result)


def log(session: Session, limit: int) -> PurgeLogPage:
    return PurgeLogPage(items=[PurgeLogRead.model_validate(r) for r in retention.log(psycopg_connection(session), limit)])
