from __future__ import annotations

from fastapi import APIRouter, Request, Response

from api.health import service
from api.health.schemas import CacheStatsRead, HealthRead

router = APIRouter(tags=["health"])


@router.get("/health", response_model=HealthRead, summary="Database, schema and collector status",
            responses={503: {"model": HealthRead, "description": "the database is unreachable"}})
def get_health(request: Request, response: Response) -> HealthRead:
    result = service.health(request.app.state.engine,
                            stale_seconds=request.app.state.settings.heartbeat_stale_seconds)
    if not result.database:
        response.status_code = 503
    cache = request.app.state.read_cache
    if cache is not None:
        result.cache = CacheStatsRead(**cache.stats())
    return result
