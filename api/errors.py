"""Typed API errors, rendered as ErrorRead {"error": <class>, "detail": <message>, "field": …}:
the API's own errors, request validation (422 InvalidInput), a body that is not UTF-8 JSON
(422 InvalidInput, not FastAPI's 400), unknown paths (404 NotFound) and methods (405
MethodNotAllowed with an ``Allow`` header listing every method of the path)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, overload

from fastapi import FastAPI, Request
from fastapi.dependencies.utils import request_params_to_args
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from api.patterns import WORDS
from core.errors import ErrorKind, ServiceError, from_database

log = logging.getLogger(__name__)


def _message(error: Mapping[str, Any]) -> str:
    """A validation error in words: a pattern failure says what the value should be (api/patterns.py)."""
    pattern = (error.get("ctx") or {}).get("pattern")
    if error.get("type") == "string_pattern_mismatch" and pattern in WORDS:
        return f"{error.get('input')!r} is not {WORDS[pattern]}"
    return str(error.get("msg", "invalid"))


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
        self.extra: dict[str, Any] = {}  # more fields of the body (e.g. MEASCOM line/column)


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


class PayloadTooLarge(HTTPException):
    """A request body past its limit (api/limits.py), raised while the body is being read.
    An HTTPException, so FastAPI's body parsing passes it on rather than making it a 400."""

    def __init__(self, limit: int, anonymous: bool) -> None:
        super().__init__(413, _too_large_detail(limit, anonymous))
        self.limit, self.anonymous = limit, anonymous


def _too_large_detail(limit: int, anonymous: bool) -> str:
    if anonymous:
        return (f"request body over {limit} bytes without a bearer token (every endpoint that takes a body "
                "needs one: send Authorization: Bearer <token>)")
    return f"request body over {limit} bytes"


def too_large_response(limit: int, anonymous: bool) -> JSONResponse:
    return JSONResponse(ErrorRead(error="PayloadTooLarge", detail=_too_large_detail(limit, anonymous)).model_dump(
        exclude_none=True), status_code=413)


def responses(*errors: type[MeasureError]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` for the errors an endpoint may raise."""
    return {e.status_code: {"model": ErrorRead, "description": e.__name__} for e in errors}


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(MeasureError)
    async def _measure_error(_request: Request, exc: MeasureError) -> JSONResponse:
        return await _render(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        field = ".".join(str(p) for p in first["loc"] if p not in ("body", "query", "path"))
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'] if p not in ('body', 'query', 'path')) or 'request'}: {_message(e)}"
            for e in exc.errors()
        )
        body = ErrorRead(error="InvalidInput", detail=_printable(detail), field=_printable(field) or None)
        return JSONResponse(body.model_dump(exclude_none=True), status_code=422)

    @app.exception_handler(PayloadTooLarge)
    async def _too_large(_request: Request, exc: PayloadTooLarge) -> JSONResponse:
        return too_large_response(exc.limit, exc.anonymous)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 400 and isinstance(exc.__cause__, ValueError):
            # FastAPI could not decode the body (UnicodeDecodeError): invalid input like bad JSON
            return await _render(InvalidInput("the body is not JSON text in UTF-8", field="body"))
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request))
        error = HTTPStatus(exc.status_code).phrase.replace(" ", "").replace("-", "")
        body = ErrorRead(error=error, detail=str(exc.detail))
        return JSONResponse(body.model_dump(exclude_none=True), status_code=exc.status_code,
                            headers=headers)

    install_database_handler(app)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at the request's path (Starlette names only the first
    route's when several share a path). A route whose path parameters reject this path (PUT
    /admin/retention/{retention_class} at /admin/retention/log) counts only when no route
    accepts it."""
    exact: set[str] = set()
    loose: set[str] = set()
    for route in iter_route_contexts(request.app.routes):
        found = route.path_regex.match(request.url.path)
        if found is None:
            continue
        methods = route.methods or {"GET", "HEAD"}  # a Mount: the static docs assets
        loose |= methods
        if isinstance(route.original_route, APIRoute):
            if request_params_to_args(route.dependant.path_params, found.groupdict())[1]:
                continue
        exact |= methods
    return sorted(exact or loose)


# ---------------------------------------------------------------- the services' errors

# core.errors' kinds (the services' errors and the database's, core.errors.from_database) as the
# API's errors
_OF_KIND: dict[ErrorKind, type[MeasureError]] = {
    ErrorKind.NOT_FOUND: NotFound,
    ErrorKind.INVALID: InvalidInput,
    ErrorKind.CONFLICT: Conflict,
    ErrorKind.UNAVAILABLE: Unavailable,
}


def service_error(exc: ServiceError) -> MeasureError:
    return _OF_KIND[exc.kind](exc.message, field=exc.field)


def database_error(exc: Exception) -> MeasureError | None:
    """The typed error for a database error a client caused, 503 when the database is away,
    or None (a bug: the generic 500)."""
    orig = getattr(exc, "orig", exc)
    typed = from_database(orig)
    if typed is not None:
        return service_error(typed)
    if isinstance(exc, OperationalError) or (isinstance(exc, DBAPIError) and exc.connection_invalidated):
        return Unavailable("the database is unreachable; try again shortly")
    if isinstance(exc, PoolTimeout):
        return Unavailable("every database connection of this worker is in use; try again shortly")
    return None


def install_database_handler(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError) -> JSONResponse:
        return await _render(service_error(exc))

    @app.exception_handler(PoolTimeout)
    async def _pool_timeout(request: Request, exc: PoolTimeout) -> JSONResponse:
        err = database_error(exc)
        assert err is not None
        _log_unavailable(request, err)
        return await _render(err)

    @app.exception_handler(DBAPIError)
    async def _db_error(request: Request, exc: DBAPIError) -> JSONResponse:
        err = database_error(exc)
        if err is None:
            raise exc
        if isinstance(err, Unavailable):
            _log_unavailable(request, err)
        return await _render(err)


def _log_unavailable(request: Request, err: MeasureError) -> None:
    """A 503 the API gives is logged, one line with its reason (issue 27, item 8)."""
    client = request.client
    log.warning("503 to %s for %s %s: %s", f"{client.host}:{client.port}" if client else "a client",
                request.method, request.url.path, err.detail)


@overload
def _printable(text: str) -> str: ...
@overload
def _printable(text: None) -> None: ...
@overload
def _printable(text: str | None) -> str | None: ...


def _printable(text: str | None) -> str | None:
    """Text for an error body: a NUL of the input is shown escaped (ErrorRead holds none)."""
    return None if text is None else text.replace("\x00", "\\u0000")


async def _render(exc: MeasureError) -> JSONResponse:
    body = ErrorRead(error=type(exc).__name__, detail=_printable(exc.detail), field=_printable(exc.field))
    extra = {k: v for k, v in exc.extra.items() if v is not None}
    return JSONResponse({**body.model_dump(exclude_none=True), **extra}, status_code=exc.status_code)
