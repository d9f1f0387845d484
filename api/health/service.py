from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from api.health.schemas import HealthRead
from core.schema import load_plan


def health(engine: Engine, *, stale_seconds: float) -> HealthRead:
    code_version = load_plan().code_version
    try:
        with engine.connect() as conn:
            row = conn.execute(text("SELECT * FROM measure.schema_info()")).one()
    except SQLAlchemyError as exc:
        reason = str(exc.orig if getattr(exc, "orig", None) else exc).strip().splitlines()[0]
        return HealthRead(status="down", database=False, schema_version=None,
                          code_schema_version=code_version, timescaledb=None,
                          last_heartbeat_at=None, collector_alive=False, detail=reason)
    beat = row.last_heartbeat_at
    alive = beat is not None and (datetime.now(UTC) - beat).total_seconds() <= stale_seconds
    return HealthRead(
        status="ok" if alive else "degraded",
        database=True,
        schema_version=row.schema_version,
        code_schema_version=code_version,
        timescaledb=row.timescaledb,
        last_heartbeat_at=beat,
        collector_alive=alive,
        detail=None if alive else "no collector heartbeat within "
        f"{stale_seconds:g} s",
    )
