"""Answers serialised by Pydantic straight to JSON bytes.

An endpoint that returns a model lets FastAPI validate it against its response_model again
and then serialise it; for the large read pages (counter records, tier rows) built by our own
services that second validation is pure cost. Such endpoints return :func:`model_json`
(the OpenAPI schema still comes from the route's ``response_model``).
"""

from __future__ import annotations

from pydantic import BaseModel
from starlette.responses import Response


def model_json(model: BaseModel, status_code: int = 200) -> Response:
    return Response(content=model.__pydantic_serializer__.to_json(model, by_alias=True),
                    status_code=status_code, media_type="application/json")
