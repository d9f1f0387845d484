"""MEASCOM over HTTP (POST /meascom): the interpreter of collector/meascom/ on the API's
database session, as the API role.

* The text runs as one OBEY file inside the request's transaction (the interpreter's own
  savepoint makes it all-or-nothing). Its output is the response.
* Errors: a syntax error → 422 MeascomSyntaxError with line, column, word and expected; an
  unknown or ambiguous system → 422 (field ``system``); a command refused → 409
  MeascomRefused with line and column. ``detail`` is the interpreter's message with its
  position, which is what ``meascom --api`` prints (exit status 2 for 422, 1 for 409).
* OBEY and OUT (and ``/OUT file/`` options) read or write files; over HTTP they would be
  files of the server, so they are refused (422): send the OBEY file's text instead.
* Least privilege: measure_api cannot touch schema _measure, and the interpreter never names
  it: it reads the measure.* views and writes only through the SECURITY DEFINER functions
  (measure.create_measurement, stop_measurement, submit_request, request_answer,
  forget_request, append_structured_record; 030-api.sql, 035-meascom.sql), so it runs here
  on the request's connection as it is. Collector requests go through a side connection
  from the API's pool (also measure_api), committed at once so the collector sees them.
"""

from __future__ import annotations

from typing import Any

import psycopg
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from api.db import driver, psycopg_connection
from api.errors import Conflict, InvalidInput, MeasureError
from api.meascom.schemas import MeascomOutputRead, MeascomRun
from collector.meascom import ast
from collector.meascom.interpreter import MeascomError
from collector.meascom.interpreter import Session as MeascomSession
from collector.meascom.parser import MeascomSyntaxError, parse_script


class MeascomSyntax(InvalidInput):
    """A MEASCOM syntax error (422); nothing ran."""


class MeascomRefused(Conflict):
    """A MEASCOM command was refused (409); nothing of the text changed."""


def _typed(exc: MeascomError) -> MeasureError:
    cls: type[MeasureError] = MeascomSyntax if exc.syntax else MeascomRefused
    err = cls(str(exc), field="text")
    err.extra = {"line": exc.line or None, "column": exc.column or None, "word": exc.word or None,
                 "expected": list(exc.expected) or None, "file": exc.file}
    return err


class _Side:
    """An autocommit connection from the API's pool (so it runs as measure_api), given back
    to the pool afterwards: the collector must see a request before the text commits."""

    def __init__(self, engine: Engine) -> None:
        self.raw = engine.raw_connection()
        self.conn = driver(self.raw)

    def __enter__(self) -> psycopg.Connection:
        self.conn.rollback()
        self.conn.autocommit = True
        return self.conn

    def __exit__(self, *exc: object) -> None:
        try:
            self.conn.autocommit = False
        finally:
            self.raw.close()


class ApiMeascomSession(MeascomSession):
    """The interpreter on the API's connection (a savepoint in the request's transaction)."""

    def __init__(self, conn: psycopg.Connection, engine: Engine, **kw: Any) -> None:
        self._engine = engine
        super().__init__(conn, **kw)

    def _side_connection(self) -> Any:
        return _Side(self._engine)


# ---------------------------------------------------------------- the run


def _refuse_files(text: str, interactive: bool) -> None:
    """Parse everything first (a syntax error names its place) and refuse file commands."""
    try:
        commands = parse_script(text, interactive=interactive)
    except MeascomSyntaxError as exc:
        raise _typed(MeascomError.from_syntax(exc, None)) from None
    for cmd in commands:
        name = ("OBEY" if isinstance(cmd, ast.Obey) else "OUT" if isinstance(cmd, ast.Out)
                else "/OUT/" if getattr(cmd, "out", None) else None)
        if name is not None:
            err = MeascomSyntax(f"line {cmd.line}, column {cmd.column}: {name} is not available "
                                "over the API (it names a file on the server); send the OBEY "
                                "file's text, or run meascom against the database", field="text")
            err.extra = {"line": cmd.line, "column": cmd.column, "word": name}
            raise err


def run(session: Session, engine: Engine, body: MeascomRun) -> MeascomOutputRead:
    _refuse_files(body.text, body.interactive)
    conn = psycopg_connection(session)
    try:
        mc = ApiMeascomSession(conn, engine, system=body.system, interactive=body.interactive)
    except MeascomError as exc:
        raise InvalidInput(str(exc), field="system") from None
    try:
        output = mc.execute(body.text, interactive=body.interactive)
    except MeascomError as exc:
        raise _typed(exc) from None
    return MeascomOutputRead(output=output)
