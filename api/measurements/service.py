"""Measurements: create (CONTAB JSON or MEASCOM text), list, show, start, stop, delete,
status (MEASSTATUS via the collector) and configuration (MEASREADCONF / INFO MEASUREMENT).

Every change goes through the SECURITY DEFINER functions of schema/idempotent/030-api.sql;
their errors (unknown measurement, wrong state, duplicate live name, bad times) reach the
client through the database-error handler of api/errors.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from api.control import call_collector, resolve_system
from api.errors import InvalidInput, NotFound
from api.measurements.schemas import (
    MeasurementConfigurationRead,
    MeasurementCreate,
    MeasurementPage,
    MeasurementRead,
    MeasurementStart,
    MeasurementStatusRead,
    MeasurementStop,
)
from collector.meascom import ast
from collector.meascom.configure import CONFIG_COMMANDS, ContabCommandError, apply_commands
from collector.meascom.parser import MeascomSyntaxError, parse_script
from collector.measure.contab import Contab, ContabBuilder, format_process_spec
from core import control

_COLUMNS = ("measurement_id, system_name, name, state, state_detail, start_at, stop_at, "
            "interval_seconds::float8 AS interval_seconds, started_at, stopped_at, created_at, "
            "updated_at, source")


def get(session: Session, measurement_id: int) -> MeasurementRead:
    row = session.execute(text(f"SELECT {_COLUMNS} FROM measure.measurement WHERE measurement_id = :id"),
                          {"id": measurement_id}).mappings().first()
    if row is None:
        raise NotFound(f"no measurement {measurement_id}", field="measurement_id")
    return MeasurementRead.model_validate(dict(row))


def list_page(session: Session, *, state: str | None, name: str | None, limit: int,
              cursor: str | None) -> MeasurementPage:
    after = 0
    if cursor is not None:
        if not cursor.isdigit() or len(cursor) > 10:
            raise InvalidInput("cursor is not one this API returned; start again without it", field="cursor")
        after = int(cursor)
    rows = session.execute(text(
        f"SELECT {_COLUMNS} FROM measure.measurement "
        " WHERE measurement_id > :after AND (CAST(:state AS text) IS NULL OR state = :state)"
        "   AND (CAST(:name AS text) IS NULL OR upper(name) = upper(:name))"
        " ORDER BY measurement_id LIMIT :lim"),
        {"after": after, "state": state, "name": name, "lim": limit + 1}).mappings().all()
    items = [MeasurementRead.model_validate(dict(r)) for r in rows[:limit]]
    nxt = str(items[-1].measurement_id) if len(rows) > limit else None
    return MeasurementPage(items=items, next_cursor=nxt)


# ---------------------------------------------------------------- MEASCOM → configuration


def _resolve_datetime(dt: Any, tz: ZoneInfo, now: datetime) -> datetime:
    today = now.astimezone(tz).date()
    day = dt.date.resolve(today) if dt.date is not None else today
    return datetime.combine(day, dt.time.time, tzinfo=tz)


def _from_meascom(body: MeasurementCreate, tz: ZoneInfo, now: datetime) -> dict[str, Any]:
    """Contab, name and schedule from MEASCOM text; raises InvalidInput naming line/column."""
    try:
        commands = parse_script(body.meascom or "")
    except MeascomSyntaxError as exc:
        raise InvalidInput(f"MEASCOM {exc}", field="meascom") from None
    out: dict[str, Any] = {"name": None, "start": None}
    for cmd in commands:
        if isinstance(cmd, ast.AddMeasurement):
            out["name"] = cmd.file
        elif isinstance(cmd, ast.StartMeasurement):
            if out["start"] is not None:
                raise InvalidInput(f"MEASCOM line {cmd.line}: a second START MEASUREMENT", field="meascom")
            out["start"] = cmd
            out["name"] = out["name"] or cmd.file
        elif not isinstance(cmd, CONFIG_COMMANDS):
            raise InvalidInput(
                f"MEASCOM line {cmd.line}, column {cmd.column}: {type(cmd).__name__} is not a "
                "configuration command; only VOLUME, ADD/DELETE entity or COUNTER, ADD MEASUREMENT "
                "and START MEASUREMENT are accepted here", field="meascom")
    try:
        out["contab"] = apply_commands(ContabBuilder(), commands).build()
    except ContabCommandError as exc:
        raise InvalidInput(f"MEASCOM {exc}", field="meascom") from None
    except ValueError as exc:
        raise InvalidInput(f"MEASCOM: {exc}", field="meascom") from None
    start = out.pop("start")
    if start is not None:
        out["start_at"] = _resolve_datetime(start.start, tz, now) if start.start else now
        if start.to is not None:
            out["stop_at"] = _resolve_datetime(start.to, tz, now)
            if out["stop_at"] <= out["start_at"]:
                out["stop_at"] += timedelta(days=1)  # TO a time of day: the next one
        elif start.for_ is not None:
            out["stop_at"] = out["start_at"] + timedelta(seconds=start.for_.seconds)
        if start.interval is not None:
            out["interval_us"] = start.interval.us
    return out


def _schedule(start_at: datetime | None, stop_at: datetime | None, for_seconds: int | None,
              now: datetime, *, start_now: bool) -> tuple[datetime | None, datetime | None]:
    if stop_at is not None and for_seconds is not None:
        raise InvalidInput("give either stop_at (TO) or for_seconds (FOR), not both", field="for_seconds")
    for name, v in (("start_at", start_at), ("stop_at", stop_at)):
        if v is not None and v.tzinfo is None:
            raise InvalidInput(f"{name} needs a time zone (e.g. 2024-05-01T08:00:00Z)", field=name)
    if start_at is None and (start_now or stop_at is not None or for_seconds is not None):
        start_at = now
    if for_seconds is not None and start_at is not None:
        stop_at = start_at + timedelta(seconds=for_seconds)
    return start_at, stop_at


def create(session: Session, body: MeasurementCreate) -> MeasurementRead:
    if (body.contab is None) == (body.meascom is None):
        raise InvalidInput("give exactly one of contab (CONTAB JSON) or meascom (MEASCOM text)",
                           field="contab")
    system = resolve_system(session, body.system)
    now = datetime.now(UTC)
    name, source = body.name, None
    start_at, stop_at = _schedule(body.start_at, body.stop_at, body.for_seconds, now, start_now=body.start)
    interval_us = body.interval_seconds * 1_000_000 if body.interval_seconds else None
    if body.meascom is not None:
        cfg = _from_meascom(body, ZoneInfo(system.time_zone), now)
        if "start_at" in cfg and (body.start or body.start_at or body.stop_at or body.for_seconds):
            raise InvalidInput("the MEASCOM text has START MEASUREMENT: give the schedule there, "
                               "not also in start/start_at/stop_at/for_seconds", field="meascom")
        if name is not None and cfg["name"] is not None and name.upper() != cfg["name"].upper():
            raise InvalidInput(f"name {name!r} differs from the MEASCOM measurement {cfg['name']}",
                               field="name")
        name = name or cfg["name"]
        contab: Contab = cfg["contab"]
        start_at = cfg.get("start_at", start_at)
        stop_at = cfg.get("stop_at", stop_at)
        interval_us = cfg.get("interval_us", interval_us)
        source = body.meascom
    else:
        assert body.contab is not None  # (exactly one of the two: checked above)
        contab = body.contab
    if not name:
        raise InvalidInput("name the measurement (name, or ADD MEASUREMENT in the MEASCOM text)",
                           field="name")
    if not contab.descriptors and not contab.counters:
        raise InvalidInput("the configuration measures nothing: add at least one entity descriptor",
                           field="contab")
    mid = session.execute(
        text("SELECT measure.create_measurement(:sys, :name, CAST(:contab AS jsonb), :src, "
             "CAST(:start AS timestamptz), CAST(:stop AS timestamptz), CAST(:iv AS bigint))"),
        {"sys": system.system_name, "name": name, "contab": contab.model_dump_json(), "src": source,
         "start": start_at, "stop": stop_at, "iv": interval_us}).scalar_one()
    return get(session, mid)


def start(session: Session, measurement_id: int, body: MeasurementStart) -> MeasurementRead:
    now = datetime.now(UTC)
    start_at, stop_at = _schedule(body.start_at, body.stop_at, body.for_seconds, now, start_now=True)
    session.execute(
        text("SELECT measure.start_measurement(:id, CAST(:start AS timestamptz), "
             "CAST(:stop AS timestamptz), CAST(:iv AS bigint))"),
        {"id": measurement_id, "start": start_at, "stop": stop_at,
         "iv": body.interval_seconds * 1_000_000 if body.interval_seconds else None})
    return get(session, measurement_id)


def stop(session: Session, measurement_id: int, body: MeasurementStop) -> MeasurementRead:
    if body.stop_at is not None and body.stop_at.tzinfo is None:
        raise InvalidInput("stop_at needs a time zone (e.g. 2024-05-01T08:00:00Z)", field="stop_at")
    session.execute(text("SELECT measure.stop_measurement(:id, CAST(:stop AS timestamptz))"),
                    {"id": measurement_id, "stop": body.stop_at})
    return get(session, measurement_id)


def delete(session: Session, measurement_id: int) -> None:
    session.execute(text("SELECT measure.delete_measurement(:id)"), {"id": measurement_id})


def status(session: Session, engine: Engine, measurement_id: int, *, timeout: float) -> MeasurementStatusRead:
    m = get(session, measurement_id)
    if m.state == "configured" or (m.state == "stopped" and m.started_at is None):
        return MeasurementStatusRead(measurement_id=m.measurement_id, name=m.name, state=m.state,
                                     collector=None)
    system = resolve_system(session, m.system_name)
    answer = call_collector(engine, system.system_id, control.Status(measurement_id=measurement_id),
                            timeout=timeout)
    return MeasurementStatusRead(measurement_id=m.measurement_id, name=m.name, state=m.state,
                                 collector=answer.model_dump(mode="json"))


# ---------------------------------------------------------------- configuration as MEASCOM


def descriptor_spec(type_: str, fields: dict[str, Any]) -> str | None:
    """A descriptor as a MEASCOM entity spec, or None when MEASCOM cannot express it."""
    f = dict(fields)
    if not f:
        return "*"
    if type_ in ("PROCESS", "USERDEF", "PROCESSH"):
        proc: dict[str, Any] = {k: f.pop(k) for k in ("cpu", "pin", "process_name", "program_file_name", "oss_path") if k in f}
        return None if f else format_process_spec(proc)
    if type_ in ("CPU", "TMF"):
        return str(f["cpu"]) if set(f) == {"cpu"} else None
    if type_ in ("FILE", "DISCOPEN"):
        return str(f["file_name"]) if set(f) == {"file_name"} else None
    if type_ in ("DISC", "DEVICE", "LINE", "NETLINE"):
        if set(f) - {"device_name", "cpu"}:
            return None
        name = str(f.get("device_name", "$*"))
        return f"{name}({f['cpu']})" if "cpu" in f else name
    if type_ == "TERMINAL":
        if set(f) - {"line_name", "subdev_name"}:
            return None
        return f"{f.get('line_name', '$*')}.{f['subdev_name']}" if "subdev_name" in f else str(f["line_name"])
    if type_ in ("SYSTEM", "CLUSTER"):
        if set(f) == {"remote_system"} and type_ == "SYSTEM":
            return str(f["remote_system"])
        if set(f) == {"remote_system_name"}:
            return str(f["remote_system_name"])
    return None


def contab_commands(contab: Contab, name: str) -> list[str]:
    """INFO MEASUREMENT: the configuration as ADD and DELETE commands (an OBEY file)."""
    lines: list[str] = []
    for d in contab.ordered():
        spec = descriptor_spec(d.type, dict(d.fields))
        verb = "DELETE" if d.exclude else "ADD"
        if spec is None:
            lines.append(f"== {verb} {d.type} {json.dumps(d.fields)} has no MEASCOM spec form")
        else:
            lines.append(f"{verb} {d.type} {spec}")
    for c in contab.counters:
        arr = f", ARRAY {c.array}" if c.array is not None else ""
        lines.append(f"ADD COUNTER {c.name}, PROCESS {c.process_spec}, {c.type}{arr}")
    lines.append(f"ADD MEASUREMENT {name}")
    return lines


def configuration(session: Session, measurement_id: int) -> MeasurementConfigurationRead:
    m = get(session, measurement_id)
    raw = session.execute(text("SELECT contab FROM measure.measurement WHERE measurement_id = :id"),
                          {"id": measurement_id}).scalar_one()
    contab = Contab.model_validate(raw)
    return MeasurementConfigurationRead(
        measurement_id=m.measurement_id, name=m.name, contab=contab,
        commands=contab_commands(contab, m.name), start_at=m.start_at, stop_at=m.stop_at,
        interval_seconds=m.interval_seconds)
