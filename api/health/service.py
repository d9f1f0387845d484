from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from api.health.schemas import HealthRead
from core.schema import load_plan

# A collector registering, compiling its node (numba's first start takes a minute or more on a
# slow machine) or backfilling may beat less often than a live one: it counts as starting for
# this long after its last heartbeat.
STARTING = ("starting", "backfill")
STARTING_STALE_S = 600.0


def health(engine: Engine, *, stale_seconds: float) -> HealthRead:
    code_version = load_plan().code_version
    try:
        with engine.connect() as conn:
            row = conn.execute(text("SELECT * FROM measure.schema_info()")).one()
    except SQLAlchemyError as exc:
        orig = getattr(exc, "orig", None)  # (a DBAPIError's: the driver's own message)
        reason = str(orig if orig else exc).strip().splitlines()[0]
        return HealthRead(status="down", database=False, schema_version=None,
                          code_schema_version=code_version, timescaledb=None,
                          last_heartbeat_at=None, collector_alive=False, detail=reason)
    beat = row.last_heartbeat_at
    age = None if beat is None else (datetime.now(UTC) - beat).total_seconds()
    stopped = row.collector_mode == "stopped"  # its last beat, when it ended (a backfill, Ctrl-C)
    alive = age is not None and age <= stale_seconds and not stopped
    starting = row.collector_mode in STARTING and age is not None and age <= STARTING_STALE_S
    status: str
    detail: str | None
    if starting:
        done = (row.collector_detail or {}).get("backfill_done")
        left = (row.collector_detail or {}).get("backfill_left_s")
        status, detail = "starting", (
            "the collector is starting (registering, building the node)" if row.collector_mode == "starting"
            else f"the collector is backfilling its history ({100 * float(done or 0):.0f} % done"
                 + ("" if left is None else f", about {float(left):.0f} s left") + "); live collection follows")
    elif alive:
        # what the collector's node says its figures miss (the host node's CPU queue where the
        # kernel gives no complete source: docs/host-node.md), else nothing to say
        status, detail = "ok", (row.collector_detail or {}).get("note") or None
    else:
        status, detail = "degraded", (
            "no collector has started yet (run `measuredb collector`, or `make run`)" if beat is None
            else f"the collector stopped at {beat:%Y-%m-%d %H:%M:%S} UTC (run `measuredb collector`, or "
                 "`make run`)" if stopped
            else f"no collector heartbeat within {stale_seconds:g} s")
    return HealthRead(
        status=status,
        database=True,
        schema_version=row.schema_version,
        code_schema_version=code_version,
        timescaledb=row.timescaledb,
        last_heartbeat_at=beat,
        collector_alive=alive or starting,
        collector_mode=row.collector_mode,
        detail=detail,
    )
