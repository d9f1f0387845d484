"""The control-request protocol: what the API and MEASCOM ask the running collector, and what
it answers. This module is its one definition, shared by both ends.

The requests travel through the database (no extra port; works the same in compose):

* the asking side calls :func:`submit` (``measure.submit_request`` inserts a row of
  ``_measure.control_request`` and NOTIFYs ``measuredb_request`` when it commits), then reads
  the outcome with :func:`outcome` until it is there;
* the collector reads its system's pending requests with :func:`pending` and answers each
  with :func:`reply`: an answer (``response``, JSON) or a :class:`Refusal` (``error_code``,
  one of :class:`ErrorKind`, and ``error``, the message), then NOTIFYs ``measuredb_answer``
  with the request id.

A request is one of four kinds (:class:`RequestKind`), each with a typed payload and a typed
answer (:data:`REQUESTS` pairs them):

* ``read_active``: :class:`ReadActive` -> :class:`ActiveRead` (MEASREADACTIVE, LISTACTIVE);
* ``status``: :class:`Status` -> :class:`StatusAnswer` (MEASSTATUS);
* ``bump_init``: :class:`BumpInit` -> :class:`BumpInitAnswer` (MEASCOUNTERBUMPINIT);
* ``bump``: :class:`Bump` -> :class:`BumpAnswer` (MEASCOUNTERBUMP).

The SQL side lists the same kinds (the CHECK of ``_measure.control_request.kind``, frozen in
schema/000-foundation.sql, and ``measure.submit_request`` in schema/idempotent/030-api.sql)
and the same error codes (the CHECK of ``error_code``, schema/150-control-error-code.sql);
tests/core/test_control.py reads them from a real database and fails when they differ.

Times travel as ISO 8601 text with an offset (``datetime.isoformat()``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

import psycopg
from psycopg.types.json import Jsonb
from pydantic import (
    BaseModel,
    ConfigDict,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from core.database import scalar
from core.errors import ErrorKind

__all__ = [
    "ERROR_CODES", "REQUESTS", "ActiveRead", "ActiveRecord", "Answer", "Bump", "BumpAnswer",
    "BumpInit", "BumpInitAnswer", "BumpOp", "CpuSpace", "ErrorKind", "MalformedAnswer",
    "MeasurementStatus", "ReadActive", "Refusal", "Request", "RequestKind", "Status",
    "StatusAnswer", "UserCounterIds", "describe_invalid", "outcome", "parse_request", "pending",
    "reply", "submit",
]


class RequestKind(StrEnum):
    READ_ACTIVE = "read_active"
    STATUS = "status"
    BUMP_INIT = "bump_init"
    BUMP = "bump"


# The codes of an error answer: the platform's typed errors (core/errors.py), which the API
# answers with 404, 422, 409 and 503.
ERROR_CODES: tuple[ErrorKind, ...] = tuple(ErrorKind)

# An instant on the wire: ISO 8601 with its offset, as datetime.isoformat() writes it
Instant = Annotated[datetime, PlainSerializer(lambda t: t.isoformat(), return_type=str, when_used="json")]


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------- requests


class ReadActive(_Message):
    """MEASREADACTIVE: the live counter records of an entity type matching a descriptor."""

    kind: ClassVar[RequestKind] = RequestKind.READ_ACTIVE

    entity: str                                   # catalogue entity name
    descriptor: dict[str, Any] = {}               # canonical CONTAB descriptor fields ({} = all)
    measurement_id: int | None = None             # None: any active measurement's records


class Status(_Message):
    """MEASSTATUS of one measurement MEASMON knows."""

    kind: ClassVar[RequestKind] = RequestKind.STATUS

    measurement_id: int


class UserCounterIds(_Message):
    """One element of a user counter in one process (the USERDEF identifying fields); the
    process and program names are optional: they are what USERDEF descriptors match."""

    cpu: int
    pin: int
    name: str
    index: int = 0
    process_name: str | None = None
    program_file_name: str | None = None

    @model_serializer(mode="wrap")
    def _without_unset_names(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        for extra in ("process_name", "program_file_name"):
            if out.get(extra) is None:
                out.pop(extra, None)
        return out


class BumpInit(_Message):
    """MEASCOUNTERBUMPINIT: the element's offset (created on first use)."""

    kind: ClassVar[RequestKind] = RequestKind.BUMP_INIT

    ids: UserCounterIds


BumpOp = Literal["INC", "ADD", "SETBUSY", "RESETBUSY", "INCQUEUE", "DEQUEUE"]


class Bump(_Message):
    """MEASCOUNTERBUMP at the node's current time."""

    kind: ClassVar[RequestKind] = RequestKind.BUMP

    ids: UserCounterIds
    offset: int | None = None                     # from bump_init; None: not checked
    op: BumpOp
    value: int | float = 1                        # the amount of ADD


Request = ReadActive | Status | BumpInit | Bump


# ---------------------------------------------------------------- answers


class ActiveRecord(_Message):
    key: str                                      # entity key
    ids: dict[str, Any]                           # identifying fields
    cpu: int
    record_at: Instant                            # allocation of the counter record
    counters: dict[str, int | float]              # cumulative, by MEASURE counter name
    baseline_at: Instant | None = None            # with a measurement: its start or
    baseline: dict[str, int | float] | None = None  # initial-value copy, when it has one


class ActiveRead(_Message):
    """An entity that no active measurement measures is absent; none at all: no records."""

    entity: str
    at: Instant                                   # when the records were read (node time)
    records: list[ActiveRecord]


class MeasurementStatus(_Message):
    measurement_id: int
    name: str
    state: str
    entities: dict[str, int]                      # records per entity type
    counter_space_words: int
    cids: int
    copies_written: int
    not_allocated: dict[str, int]                 # "entity:error" -> records


class CpuSpace(_Message):
    cids: int
    cid_limit: int
    words: int
    words_limit: int


class StatusAnswer(_Message):
    status: MeasurementStatus
    cpus: dict[str, CpuSpace]                     # by CPU number
    at: Instant


class BumpInitAnswer(_Message):
    offset: int                                   # -1: no active measurement has the counter


class BumpAnswer(_Message):
    bumped: bool                                  # False: no active measurement measures it
    at: Instant


Answer = ActiveRead | StatusAnswer | BumpInitAnswer | BumpAnswer

# Each kind's payload and answer
REQUESTS: dict[RequestKind, tuple[type[Request], type[Answer]]] = {
    RequestKind.READ_ACTIVE: (ReadActive, ActiveRead),
    RequestKind.STATUS: (Status, StatusAnswer),
    RequestKind.BUMP_INIT: (BumpInit, BumpInitAnswer),
    RequestKind.BUMP: (Bump, BumpAnswer),
}


@dataclass(frozen=True)
class Refusal:
    """An error answer: what kind of error, and the collector's message."""

    code: ErrorKind
    message: str


class MalformedAnswer(ValueError):
    """The collector answered with something that is not this kind's answer."""


def parse_request(kind: str, payload: Any) -> Request:
    """The typed request of a pending row; a :class:`Refusal`-worthy mistake raises
    ValueError (an unknown kind) or pydantic's ValidationError (a missing or mistyped field)."""
    try:
        request_type = REQUESTS[RequestKind(kind)][0]
    except ValueError:
        raise ValueError(f"unknown request kind {kind!r}") from None
    return request_type.model_validate(payload if isinstance(payload, dict) else {})


def describe_invalid(exc: ValidationError) -> str:
    """A one-line account of what a request lacks or mistypes."""
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'payload'}: {e['msg']}" for e in exc.errors()]
    return f"the request lacks or mistypes a field ({'; '.join(parts)})"


# ---------------------------------------------------------------- the asking side


def submit(conn: psycopg.Connection, system_id: int, request: Request) -> int:
    """Hand a request to the collector of a system (measure.submit_request); its id. The
    collector sees it once the caller commits."""
    return scalar(conn.execute("SELECT measure.submit_request(%s::smallint, %s, %s)",
                               (system_id, request.kind.value, Jsonb(request.model_dump(mode="json")))))


def outcome(conn: psycopg.Connection, request_id: int,
            request: Request) -> Answer | Refusal | None:
    """The collector's answer to a request (measure.request_answer): its typed answer, a
    :class:`Refusal`, or None while there is none (pending, or no such request). Raises
    :class:`MalformedAnswer` when the answer is not the kind's."""
    row = conn.execute("SELECT answered_at, response, error_code, error FROM measure.request_answer(%s)",
                       (request_id,)).fetchone()
    if row is None or row[0] is None:
        return None
    _answered_at, response, code, error = row
    if error is not None:
        return Refusal(ErrorKind(code), error)
    answer_type = REQUESTS[request.kind][1]
    try:
        return answer_type.model_validate(response)
    except ValidationError as exc:
        raise MalformedAnswer(f"the collector's {request.kind} answer is malformed "
                              f"({exc.error_count()} errors, first: {exc.errors()[0]['msg']})") from None


# ---------------------------------------------------------------- the collector's side


def pending(conn: psycopg.Connection, system_id: int) -> list[tuple[int, str, Any]]:
    """The system's unanswered requests, oldest first: (request id, kind, payload)."""
    return conn.execute(
        "SELECT request_id, kind, payload FROM _measure.control_request"
        " WHERE system_id = %s AND answered_at IS NULL ORDER BY request_id",
        (system_id,),
    ).fetchall()


def reply(conn: psycopg.Connection, request_id: int, result: Answer | Refusal) -> None:
    """Answer one request and tell whoever waits for it (NOTIFY measuredb_answer)."""
    if isinstance(result, Refusal):
        response, code, error = None, result.code.value, result.message
    else:
        response, code, error = Jsonb(result.model_dump(mode="json")), None, None
    conn.execute(
        "UPDATE _measure.control_request SET response = %s, error_code = %s, error = %s,"
        " answered_at = now() WHERE request_id = %s",
        (response, code, error, request_id),
    )
    conn.execute("SELECT pg_notify('measuredb_answer', %s)", (str(request_id),))
