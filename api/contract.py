"""The API's contract: input no endpoint accepts, and an OpenAPI document that says what the
endpoints really answer.

* NUL: no text the API stores or passes on may hold a NUL character (PostgreSQL text cannot).
  :func:`reject_nul` (a dependency of every route) answers 422 for a NUL in the path, in a
  query parameter of an operation that has query parameters, or in a JSON body of an
  operation that takes one, before anything else runs.
* :data:`Instant`: a date-time parameter or field is an ISO 8601 / RFC 3339 string, never a
  number (Pydantic alone would read ``0`` as 1970-01-01). JSON bodies are validated strictly
  (``strict=True`` on their models: ``1`` is no boolean; :data:`JsonInt` takes ``3`` and
  ``3.0``, which JSON Schema calls integers, but not ``false`` or ``"3"``).
* :func:`contract_openapi` amends FastAPI's document: every free-form string (and object key)
  says it holds no NUL (``pattern: ^[^\u0000]*$``, the rule above); 422 is :class:`ErrorRead` (what the
  handlers of api/errors.py send, not FastAPI's HTTPValidationError); reads open to anonymous
  callers say so (``security: [{HTTPBearer: []}, {}]``); error answers are documented as
  application/json (what the handlers send, also where 200 is CSV); 413 is documented where a body is
  taken (api/main.py BodyLimitMiddleware), 429 with ``Retry-After`` on every operation while
  the anonymous rate limit is on (api/ratelimit.py).
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BeforeValidator, Field, Strict

from api.auth import require_read
from api.errors import ErrorRead, InvalidInput
from api.settings import ApiSettings

# ---------------------------------------------------------------- input

_ISO = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _iso_only(value: Any) -> Any:
    if isinstance(value, datetime) or (isinstance(value, str) and _ISO.match(value)):
        return value
    raise ValueError("expected an ISO 8601 date-time with a time zone, e.g. 2024-05-01T08:00:00Z")


Instant = Annotated[datetime, Strict(False), BeforeValidator(_iso_only)]  # lax: parses the string

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _iso_or_date(value: Any) -> Any:
    if isinstance(value, str) and _DATE.fullmatch(value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is no date (YYYY-MM-DD)") from None
    if isinstance(value, (datetime, date)) or (isinstance(value, str) and _ISO.match(value)):
        return value
    raise ValueError("expected a date (2024-05-01) or an ISO 8601 date-time (2024-05-01T08:00:00Z; "
                     "without an offset: the system's local time)")


# A date or a date-time where a day is meant (tier ranges): a plain date is that day's local
# midnight, a date-time without an offset the system's local time (as `measuredb export
# --from` reads them); parsed to a datetime, naive for local time.
if TYPE_CHECKING:  # always a datetime once parsed (a date becomes its midnight)
    LocalInstant = datetime
else:
    LocalInstant = Annotated[Annotated[datetime, Strict(False)] | date, Field(union_mode="left_to_right"),
                             BeforeValidator(_iso_or_date)]


def _json_integer(value: Any) -> Any:
    if isinstance(value, (bool, str)):
        raise ValueError("expected a JSON integer")
    return value


JsonInt = Annotated[int, Strict(False), BeforeValidator(_json_integer)]  # 3 and 3.0, not true or "3"


def json_range(ge: int, le: int) -> tuple[Any, ...]:
    """What makes an int a JsonInt within [ge, le] (``Annotated[int, *json_range(1, 9)]``), the
    bounds stated as JSON Schema minimum/maximum (bounds given to Field() beside a JsonInt land
    in the document as unknown ge/le keywords)."""
    return Field(ge=ge, le=le), Strict(False), BeforeValidator(_json_integer)


def _nul_at(value: Any, where: str) -> str | None:
    """The place of the first string (or key) holding a NUL in a JSON value, or None."""
    if isinstance(value, str):
        return where if "\x00" in value else None
    if isinstance(value, dict):
        for k, v in value.items():
            place = f"{where}.{k}" if where else str(k)
            if "\x00" in k:
                return place
            if (found := _nul_at(v, place)) is not None:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            if (found := _nul_at(v, f"{where}.{i}" if where else str(i))) is not None:
                return found
    return None


def _nul(field: str) -> InvalidInput:
    return InvalidInput(f"{field}: text cannot hold a NUL character (\\u0000)", field=field)


async def reject_nul(request: Request) -> None:
    """422 for a NUL in the path, a query parameter or the JSON body of this operation."""
    if "\x00" in request.url.path:
        raise _nul("path")
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    if _has_query(route):
        for name, value in request.query_params.multi_items():
            if "\x00" in name or "\x00" in value:
                raise _nul(name.replace("\x00", "\\u0000"))
    if route.body_field is not None:
        body = await request.body()
        if b"\x00" in body or b"\\u0000" in body:  # a NUL, raw or escaped, may be in there
            try:
                place = _nul_at(json.loads(body), "")
            except ValueError:  # not JSON: the body's validation answers
                return
            if place is not None:
                raise _nul(place or "body")


def _has_query(route: APIRoute) -> bool:
    def walk(dependant) -> bool:
        return bool(dependant.query_params) or any(walk(d) for d in dependant.dependencies)
    return walk(route.dependant)


# ---------------------------------------------------------------- OpenAPI

_ERROR_REF = {"$ref": "#/components/schemas/ErrorRead"}
TOO_LARGE = {"description": "PayloadTooLarge: the body is over max_body_bytes",
             "content": {"application/json": {"schema": _ERROR_REF}}}
RATE_LIMITED = {
    "description": "TooManyRequests: a caller without a bearer token is over the rate limit of "
                   "its address, or its address made too many failed authentications (api/ratelimit.py)",
    "headers": {"Retry-After": {"description": "seconds until a request is accepted again",
                                "required": True, "schema": {"type": "integer", "minimum": 1}}},
    "content": {"application/json": {"schema": _ERROR_REF}},
}


def _calls(dependant) -> set[Any]:
    out = {dependant.call}
    for d in dependant.dependencies:
        out |= _calls(d)
    return out


NO_NUL = "^[^\\u0000]*$"
_DATA_KEYS = {"examples", "example", "default", "enum", "const"}  # values, not schemas


def _forbid_nul(node: Any) -> None:
    """Add NO_NUL to every string schema without a pattern, format or enum, and to the keys
    of every object schema that takes more properties than it names."""
    if isinstance(node, list):
        for item in node:
            _forbid_nul(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "string" and not {"pattern", "format", "enum", "const"} & set(node):
        node["pattern"] = NO_NUL
    if node.get("type") == "object" and node.get("additionalProperties", True) is not False:
        node.setdefault("propertyNames", {"pattern": NO_NUL})
    for key, value in node.items():
        if key not in _DATA_KEYS:
            _forbid_nul(value)


def contract_openapi(app: FastAPI, settings: ApiSettings) -> dict[str, Any]:
    """FastAPI's OpenAPI document for ``app``, amended as the module docstring says."""
    doc = get_openapi(title=app.title, version=app.version, description=app.description,
                      routes=app.routes)
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("ErrorRead", ErrorRead.model_json_schema())
    open_reads = not settings.require_token_for_reads
    for route in iter_route_contexts(app.routes):  # included routers' routes, as served
        if not isinstance(route.original_route, APIRoute) or not route.include_in_schema:
            continue
        for method in route.methods or ():  # (an APIRoute's are always given)
            op = doc["paths"][route.path_format][method.lower()]
            responses = op["responses"]
            invalid = responses.get("422", {})
            if "HTTPValidationError" in json.dumps(invalid):
                responses["422"] = {"description": "InvalidInput: a parameter or the body is invalid",
                                    "content": {"application/json": {"schema": _ERROR_REF}}}
            for status, answer in responses.items():  # errors are JSON whatever the 200 is
                content = answer.get("content", {})
                if status >= "400" and content and "application/json" not in content:
                    answer["content"] = {"application/json": next(iter(content.values()))}
            if route.body_field is not None:
                responses["413"] = TOO_LARGE
            responses["429"] = RATE_LIMITED  # failed authentications are limited whatever the settings
            if open_reads and require_read in _calls(route.dependant):
                op["security"] = [{"HTTPBearer": []}, {}]  # the token is optional
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    _forbid_nul(doc["paths"])
    _forbid_nul(schemas)
    return doc


def install_openapi(app: FastAPI, settings: ApiSettings) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = contract_openapi(app, settings)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to amend the document
