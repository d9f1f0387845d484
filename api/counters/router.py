from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response

from api.auth import CollectorToken, ReadToken
from api.cache import Cacheable
from api.catalog import EntityName
from api.counters import service as counter_service
from api.counters.schemas import (
    ActiveReadQuery,
    CounterDefRead,
    CounterReadPage,
    CounterReadQuery,
    EntityTypeRead,
)
from api.db import SessionDep
from api.errors import Conflict, InvalidInput, NotFound, Unauthorized, Unavailable, responses
from api.responses import model_json

router = APIRouter(tags=["counters"])


@router.get("/measurements/{measurement_id}/counters/{entity}", response_model=CounterReadPage,
            summary="MEASREAD: latest, nearest to a time, window summary or every interval (LISTALL)",
            dependencies=[Cacheable],
            responses=responses(Unauthorized, NotFound, InvalidInput))
def read_counters(session: SessionDep, _: ReadToken,
                  measurement_id: Annotated[int, Path(ge=1, le=2_147_483_647)], entity: EntityName,
                  query: Annotated[CounterReadQuery, Query()]) -> Response:
    return model_json(counter_service.read_counters(session, measurement_id, entity.value, query))


@router.get("/active/{entity}", response_model=CounterReadPage,
            summary="MEASREADACTIVE / LISTACTIVE: live counters from the running collector",
            description="Asks the running collector through the control request bus (a row in "
                        "_measure.control_request), so it needs a read token even where reads of "
                        "stored data are open.",
            responses=responses(Unauthorized, NotFound, InvalidInput, Conflict, Unavailable))
def read_active(request: Request, session: SessionDep, _: CollectorToken, entity: EntityName,
                query: Annotated[ActiveReadQuery, Query()]) -> Response:
    return model_json(counter_service.read_active(
        session, request.app.state.engine, entity.value, query,
        timeout=request.app.state.settings.control_timeout_seconds))


@router.get("/catalog/entities", response_model=list[EntityTypeRead], summary="Entity types",
            dependencies=[Cacheable])
def list_entity_types(_: ReadToken) -> list[EntityTypeRead]:
    return counter_service.entity_types()


@router.get("/catalog/entities/{entity}/counters", response_model=list[CounterDefRead],
            summary="Counters of an entity type, in record order", dependencies=[Cacheable])
def list_counters(_: ReadToken, entity: EntityName) -> list[CounterDefRead]:
    return counter_service.counter_defs(entity.value)
