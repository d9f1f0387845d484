"""Import and export over the API, on the importer and exporter the CLI uses
(core/importer.py, core/exporter.py).

The import runs in the request's one transaction as the API's role, which changes storage only
through the SECURITY DEFINER functions of schema/idempotent/055-import.sql (measure.import_*).
The body is read as it arrives (a chunked upload is never held whole), parsed and staged a
batch at a time, checked and stored, and its hours condensed before the answer: bad rows give
422 with every problem (line, field) and nothing stored.

The export streams ``COPY … TO STDOUT`` of the public views on a connection of its own, held for
as long as the answer is being sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime

from psycopg import sql
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from api.db import driver, psycopg_connection
from api.errors import InvalidInput, NotFound
from api.io.schemas import ImportRead
from core.exporter import ExportError, ExportSpec, interval_csv, plan, systems_of, tier_query
from core.importer import ImportFailed, csv_rows, import_rows


def import_problems(exc: ImportFailed) -> InvalidInput:
    """422 with the bad rows (ImportFailedRead)."""
    err = InvalidInput(exc.summary(), field="body")
    err.extra = {"bad_rows": exc.total_rows, "problems": [p.as_dict() for p in exc.problems]}
    return err


def import_csv(session: Session, chunks: Iterable[bytes], *, filename: str, entity: str | None,
               measurement: str | None, max_problems: int) -> ImportRead:
    conn = psycopg_connection(session)
    try:
        r = import_rows(conn, csv_rows(chunks), where=filename, entity=entity, measurement=measurement,
                        stage="function", max_problems=max_problems)
    except ImportFailed as exc:
        raise import_problems(exc) from None
    return ImportRead(entity=r.entity, rows=r.rows, stored=r.stored, unchanged=r.unchanged,
                      duplicates=r.duplicates, hours=r.hours, hours_condensed=r.condensed, systems=r.systems,
                      measurements=r.measurements, missing_counters=r.missing_counters,
                      ignored_columns=r.ignored_columns)


def _error(exc: ExportError):
    # an unknown system, or a tier the entity type does not have: nothing there to export
    return (NotFound if exc.field in ("system", "tier") else InvalidInput)(str(exc), field=exc.field)


def prepare_export(session: Session, *, entity: str, kind: str, system: str | None) -> tuple[ExportSpec, list[int]]:
    """What GET /export will stream (errors answered before the stream starts)."""
    try:
        specs = plan(entity, kind)
        if len(specs) != 1:
            raise ExportError("name one entity type", "entity")
        systems = systems_of(psycopg_connection(session), system)
    except ExportError as exc:
        raise _error(exc) from None
    return specs[0], [s[0] for s in systems]


def stream_export(engine: Engine, spec: ExportSpec, system_ids: list[int], lo: datetime | None,
                  hi: datetime | None, time_format: str) -> Iterator[bytes]:
    """The CSV of one export, chunk by chunk, read on a pooled connection of its own."""
    raw = engine.raw_connection()
    try:
        conn = driver(raw)
        if spec.kind == "interval":
            yield from interval_csv(conn, spec.entity, system_ids, lo, hi, time_format=time_format)
        else:
            query, _, _ = tier_query(conn, spec.entity, spec.kind, system_ids, lo, hi)
            with conn.cursor() as cur, cur.copy(
                    sql.SQL("COPY ({}) TO STDOUT WITH (FORMAT csv, HEADER)").format(query)) as cp:
                for data in cp:
                    yield bytes(data)
        raw.rollback()
    finally:
        raw.close()
