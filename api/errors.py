"""Typed API errors, rendered by one handler as {"error": <class>, "detail": <message>}."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel


class ErrorRead(BaseModel):
    error: str
    detail: str
    field: str | None = None


class MeasureError(Exception):
    status_code = 400

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field


class NotFound(MeasureError):
    status_code = 404


class InvalidInput(MeasureError):
    status_code = 422


class Conflict(MeasureError):
    status_code = 409


class Unauthorized(MeasureError):
    status_code = 401


class Forbidden(MeasureError):
    status_code = 403


class Unavailable(MeasureError):
    status_code = 503


def responses(*errors: type[MeasureError]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` for the errors an endpoint may raise."""
    return {e.status_code: {"model": ErrorRead, "description": e.__name__} for e in errors}


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(MeasureError)
    async def _measure_error(_request: Request, exc: MeasureError) -> JSONResponse:
        body = ErrorRead(error=type(exc).__name__, detail=exc.detail, field=exc.field)
        return JSONResponse(body.model_dump(exclude_none=True), status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        field = ".".join(str(p) for p in first["loc"] if p not in ("body", "query", "path"))
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'] if p not in ('body', 'query', 'path')) or 'request'}: {e['msg']}"
            for e in exc.errors()
        )
        body = ErrorRead(error="InvalidInput", detail=detail, field=field or None)
        return JSONResponse(body.model_dump(exclude_none=True), status_code=422)
