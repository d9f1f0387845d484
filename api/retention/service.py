"""Retention for admin tokens: through the SECURITY DEFINER functions of
schema/idempotent/026-retention.sql (errors reach the client through api/errors.py)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from api.errors import database_error
from api.retention.schemas import (
    PurgeLogPage,
    PurgeLogRead,
    PurgeRead,
    RetentionClassRead,
    RetentionRead,
)


def _days(keep: timedelta | None) -> int | None:
    return None if keep is None else keep.days


def show(session: Session) -> RetentionRead:
    rows = session.execute(text("SELECT class, keep, cutoff, purged_before FROM measure.retention_show()")).all()
    return RetentionRead(classes=[RetentionClassRead(retention_class=c, keep_days=_days(k), cutoff=cut,
                                                     purged_before=p) for c, k, cut, p in rows])


def set_keep(session: Session, cls: str, keep_days: int | None) -> RetentionRead:
    try:
        session.execute(text("SELECT measure.retention_set(:c, :k)"),
                        {"c": cls, "k": None if keep_days is None else timedelta(days=keep_days)})
    except DBAPIError as exc:
        err = database_error(exc)
        if err is None:
            raise
        session.rollback()
        if err.field == "keep":  # the database's name for what the API calls keep_days
            err.field = "keep_days"
        raise err from None
    session.commit()
    return show(session)


def run(session: Session, *, dry_run: bool) -> PurgeRead:
    result = session.execute(text("SELECT measure.retention_run(:d, 'api')"), {"d": dry_run}).scalar_one()
    session.commit()
    return PurgeRead.model_validate(result)


def log(session: Session, limit: int) -> PurgeLogPage:
    rows = session.execute(text("SELECT * FROM measure.purge_log(:n)"), {"n": limit}).mappings().all()
    return PurgeLogPage(items=[PurgeLogRead.model_validate(dict(r)) for r in rows])
