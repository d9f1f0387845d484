from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from api.auth import ReadToken
from api.cache import Cacheable, not_cacheable
from api.db import SessionDep
from api.errors import InvalidInput, NotFound, Unauthorized, responses
from api.responses import model_json
from api.tiers import service as tier_service
from api.tiers.schemas import StoredTier, TierAutoQuery, TierEntity, TierName, TierPage, TierQuery

router = APIRouter(prefix="/tiers", tags=["tiers"])
ERRORS = responses(Unauthorized, NotFound, InvalidInput)


@router.get("/{entity}/auto", response_model=TierPage,
            summary="Performance data base tiers: the tier that fits the range from … to",
            description=tier_service.__doc__, responses=ERRORS, dependencies=[Cacheable])
def read_tier_auto(request: Request, session: SessionDep, _: ReadToken, entity: TierEntity,
                   query: Annotated[TierAutoQuery, Query()]) -> Response:
    if query.to_at is None:
        not_cacheable(request)  # "to" defaults to now
    return model_json(tier_service.read_tier(session, entity, TierName("auto"), query))


@router.get("/{entity}/{tier}", response_model=TierPage,
            summary="Performance data base tiers (hour, shift, month, year)",
            description=tier_service.__doc__, responses=ERRORS, dependencies=[Cacheable])
def read_tier(session: SessionDep, _: ReadToken, entity: TierEntity, tier: StoredTier,
              query: Annotated[TierQuery, Query()]) -> Response:
    return model_json(tier_service.read_tier(session, entity, TierName(tier.value), query))
