"""Scheduled reports, read side: definitions, runs (filtered, paged newest first) and a run's
output. Runs are made by the collector's scheduler (core/scheduler.py); the API only
reads measure.report_definition and measure.report_run."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import text
from sqlalchemy.orm import Session

from api.db import psycopg_connection
from api.errors import Conflict, InvalidInput, NotFound
from api.reports.schemas import (
    ReportDefinitionList,
    ReportDefinitionRead,
    ReportRunDetail,
    ReportRunPage,
    ReportRunRead,
)
from core import reports
from core import scheduler as _scheduler  # noqa: F401 - importing it registers the schedule's own reports

_RUN_COLUMNS = ("run_id, definition_id, definition, report, system_name, slot_at, time_zone, parameters, "
                "instance, claimed_at, started_at, finished_at, status, rows, error, attempt, retry_after, "
                "array_remove(ARRAY[CASE WHEN output_text IS NOT NULL THEN 'text' END, "
                "CASE WHEN output_csv IS NOT NULL THEN 'csv' END, "
                "CASE WHEN output_json IS NOT NULL THEN 'json' END], NULL) AS formats")


def definitions(session: Session) -> ReportDefinitionList:
    rows = session.execute(text(
        "SELECT definition_id, name, report, system_name, parameters, schedule, outputs, enabled, "
        "description, created_at, updated_at FROM measure.report_definition ORDER BY name")).mappings().all()
    return ReportDefinitionList(items=[ReportDefinitionRead.model_validate(dict(r)) for r in rows])


def _run(row: Any) -> dict[str, Any]:
    """A run row with local_slot: the slot in the system's zone, with its offset."""
    out = {k: v for k, v in dict(row).items() if k != "time_zone"}
    out["local_slot"] = row["slot_at"].astimezone(ZoneInfo(row["time_zone"]))
    return out


def _aware(value: datetime | None, field: str) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise InvalidInput(f"{field} needs a time zone (e.g. 2024-05-01T06:00:00Z)", field=field)
    return value


def list_runs(session: Session, *, definition: str | None, report: str | None, system: str | None,
              status: str | None, slot_from: datetime | None, slot_to: datetime | None, limit: int,
              cursor: str | None) -> ReportRunPage:
    before = None
    if cursor is not None:
        if not cursor.isdigit() or len(cursor) > 18:
            raise InvalidInput("cursor is not one this API returned; start again without it", field="cursor")
        before = int(cursor)
    rows = session.execute(text(
        f"SELECT {_RUN_COLUMNS} FROM measure.report_run"
        " WHERE (CAST(:before AS bigint) IS NULL OR run_id < :before)"
        "   AND (CAST(:definition AS text) IS NULL OR definition = :definition)"
        "   AND (CAST(:report AS text) IS NULL OR report = :report)"
        "   AND (CAST(:system AS text) IS NULL OR upper(system_name) = upper(:system))"
        "   AND (CAST(:status AS text) IS NULL OR status = :status)"
        "   AND (CAST(:lo AS timestamptz) IS NULL OR slot_at >= :lo)"
        "   AND (CAST(:hi AS timestamptz) IS NULL OR slot_at < :hi)"
        " ORDER BY run_id DESC LIMIT :lim"),
        {"before": before, "definition": definition, "report": report, "system": system, "status": status,
         "lo": _aware(slot_from, "slot_from"), "hi": _aware(slot_to, "slot_to"), "lim": limit + 1},
    ).mappings().all()
    items = [ReportRunRead.model_validate(_run(r)) for r in rows[:limit]]
    nxt = str(items[-1].run_id) if len(rows) > limit else None
    return ReportRunPage(items=items, next_cursor=nxt)


def _row(session: Session, run_id: int) -> dict[str, Any]:
    row = session.execute(text(
        f"SELECT {_RUN_COLUMNS}, output_text, output_csv, output_json FROM measure.report_run"
        " WHERE run_id = :id"), {"id": run_id}).mappings().first()
    if row is None:
        raise NotFound(f"no report run {run_id}", field="run_id")
    return _run(row)


def _output(row: dict[str, Any], fmt: str) -> str | None:
    if row["status"] != "succeeded":
        return None
    stored = row[f"output_{fmt}"]
    if stored is not None or row["output_json"] is None:
        return stored
    # a rendering the definition did not ask for: made from the stored rows
    try:
        return reports.render(row["report"], json.loads(row["output_json"]), row["parameters"] or {}, fmt)
    except reports.ReportError:
        return None


def get_run(session: Session, run_id: int, fmt: str) -> ReportRunDetail:
    row = _row(session, run_id)
    output = _output(row, fmt)
    fields = {k: v for k, v in row.items() if not k.startswith("output_")}
    return ReportRunDetail.model_validate({**fields, "format": fmt, "output": output})


def run_output(session: Session, run_id: int, fmt: str) -> str:
    row = _row(session, run_id)
    if row["status"] != "succeeded":
        detail = f": {row['error']}" if row["error"] else ""
        raise Conflict(f"report run {run_id} is {row['status']}{detail}; it has no output", field="run_id")
    output = _output(row, fmt)
    if output is None:
        raise NotFound(f"report run {run_id} has no {fmt} output", field="format")
    return output


def run_report(session: Session, name: str, *, system: str | None, day: str | None,
               date_from: str | None, date_to: str | None, shift: int | None,
               extra: dict[str, Any], fmt: str) -> tuple[str, bool]:
    """Run one report of queries/ now (the same code as `measuredb report NAME`): the body, and
    whether the system has data in the report's range (text says NO DATA where it has none)."""
    try:
        rep = reports.report(name)
        params = reports.build_params(
            name, system=system, day=day, date_from=date_from, date_to=date_to, shift=shift,
            extra={k: v for k, v in extra.items() if k in rep.params},
            labels={"date": "date", "from": "from", "to": "to"})
        conn = psycopg_connection(session)
        rows = reports.run_report(conn, name, **params)
        empty = None if rows else reports.no_data(conn, name, params)
        learned = None if rows or empty else reports.no_baseline(conn, name, params)
    except reports.ReportError as exc:
        text_ = str(exc)
        field = next((f for f in ("system", "date", "from", "to", "shift") if text_.startswith(f)
                      or f" {f} " in text_), None)
        if "unknown report" in text_ or "no report" in text_:
            raise NotFound(text_, field="report") from None
        raise InvalidInput(text_, field=field) from None
    return reports.render(name, rows, params, fmt, empty or learned), empty is None
