"""Typed errors of the platform's services (core/), told apart by class, never by text.

A service function (core.configuration, core.retention, core.tokens, …) raises a
:class:`ServiceError` for a mistake its caller can fix; the command line prints it as one line
naming the option (cli/common.py), the API answers it with the status of its kind
(api/errors.py). Field names are the services' own (the SQL functions' parameter names); each
front end maps them to what its users see (an option, a JSON field).

:func:`from_database` is the one place that turns the SQLSTATEs the SQL functions raise for a
caller's mistake into these errors (the error's COLUMN names the field).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import StrEnum

import psycopg


class ErrorKind(StrEnum):
    NOT_FOUND = "not_found"
    INVALID = "invalid"
    CONFLICT = "conflict"
    UNAVAILABLE = "unavailable"


class ServiceError(Exception):
    """A mistake the caller can fix (or a database that is away): what, and which field."""

    kind: ErrorKind = ErrorKind.INVALID

    def __init__(self, message: str, *, field: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.hint = hint

    def __str__(self) -> str:
        return self.message + (f" ({self.hint})" if self.hint else "")


class NotFound(ServiceError):
    kind = ErrorKind.NOT_FOUND


class InvalidValue(ServiceError, ValueError):
    kind = ErrorKind.INVALID


class Conflict(ServiceError):
    kind = ErrorKind.CONFLICT


class Unavailable(ServiceError):
    kind = ErrorKind.UNAVAILABLE


ERROR_OF_KIND: dict[ErrorKind, type[ServiceError]] = {
    cls.kind: cls for cls in (NotFound, InvalidValue, Conflict, Unavailable)
}

# SQLSTATEs the platform's SQL functions raise for a caller's mistake (schema/idempotent/)
SQLSTATE_ERRORS: dict[str, type[ServiceError]] = {
    "P0002": NotFound,  # no_data_found
    "22023": InvalidValue,  # invalid_parameter_value
    "22007": InvalidValue,  # invalid_datetime_format
    "22008": InvalidValue,  # datetime_field_overflow
    "55000": Conflict,  # object_not_in_prerequisite_state
    "23505": Conflict,  # unique_violation
}


def from_database(exc: BaseException) -> ServiceError | None:
    """The typed error for a database error a caller caused, Unavailable when the server is
    away, or None (a bug: let it propagate)."""
    state = getattr(exc, "sqlstate", None)
    diag = getattr(exc, "diag", None)
    if state in SQLSTATE_ERRORS:
        message = (diag.message_primary if diag is not None else None) or str(exc)
        field = diag.column_name if diag is not None else None
        hint = diag.message_hint if diag is not None else None
        return SQLSTATE_ERRORS[state](message, field=field, hint=hint)
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return Unavailable("the database is unreachable; try again shortly")
    return None


@contextlib.contextmanager
def database_errors() -> Iterator[None]:
    """Within it, a database error the caller caused becomes its :class:`ServiceError`."""
    try:
        yield
    except psycopg.Error as exc:
        typed = from_database(exc)
        if typed is None:
            raise
        raise typed from None
