from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from api.auth import ReadToken
from api.cache import Cacheable, not_cacheable
from api.db import SessionDep
from api.errors import InvalidInput, NotFound, Unauthorized, responses
from api.responses import model_json
from api.tiers import service as tier_service
from api.tiers.schemas import TierEntity, TierName, TierPage, TierQuery

router = APIRouter(prefix="/tiers", tags=["tiers"])


@router.get("/{entity}/{tier}", response_model=TierPage,
            summary="Performance data base tiers (hour, shift, month, year, or auto by range)",
            description=tier_service.__doc__,
            responses=responses(Unauthorized, NotFound, InvalidInput), dependencies=[Cacheable])
def read_tier(request: Request, session: SessionDep, _: ReadToken, entity: TierEntity, tier: TierName,
              query: Annotated[TierQuery, Query()]) -> Response:
    if tier is TierName.auto and query.to_at is None:
        not_cacheable(request)  # "to" defaults to now
    return model_json(tier_service.read_tier(session, entity, tier, query))
