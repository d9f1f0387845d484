from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.auth import ReadToken
from api.db import SessionDep
from api.errors import InvalidInput, NotFound, Unauthorized, responses
from api.tiers import service as tier_service
from api.tiers.schemas import TierEntity, TierName, TierPage, TierQuery

router = APIRouter(prefix="/tiers", tags=["tiers"])


@router.get("/{entity}/{tier}", response_model=TierPage,
            summary="Performance data base tiers (hour, shift, month, year, or auto by range)",
            description=tier_service.__doc__,
            responses=responses(Unauthorized, NotFound, InvalidInput))
def read_tier(session: SessionDep, _: ReadToken, entity: TierEntity, tier: TierName,
              query: Annotated[TierQuery, Query()]) -> TierPage:
    return tier_service.read_tier(session, entity, tier, query)
