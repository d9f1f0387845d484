"""Configuration for admin tokens: through the SECURITY DEFINER functions measure.config_* of
schema/idempotent/050-config.sql, one statement each (so one transaction); their errors (22023
naming the field, P0002, 23505, 55000) reach the client through api/errors.py."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from api.configuration.schemas import (
    CalendarChange,
    CalendarRead,
    CalendarVersionWrite,
    HolidayChange,
    SystemChange,
    SystemCreate,
    SystemPage,
    SystemRead,
    SystemRemoved,
    SystemUpdate,
    ThresholdChange,
    ThresholdPage,
    ThresholdRead,
    ThresholdRemoved,
    ThresholdWrite,
)

_INFO = ("SELECT system_name AS name, system_number AS number, time_zone, os_version, cpu_types, collector, "
         "measurements, first_hour, last_hour, calendars, holidays, thresholds, created_at "
         "FROM measure.config_system_info(:s)")


def systems(session: Session) -> SystemPage:
    rows = session.execute(text(_INFO), {"s": None}).mappings().all()
    return SystemPage(items=[SystemRead.model_validate(dict(r)) for r in rows])


def system(session: Session, name: str) -> SystemRead:
    return SystemRead.model_validate(dict(session.execute(text(_INFO), {"s": name}).mappings().one()))


def add_system(session: Session, body: SystemCreate) -> SystemRead:
    name = session.execute(text("SELECT measure.config_system_add(:n, :num, :tz, :os, CAST(:ct AS jsonb))"),
                           {"n": body.name, "num": body.number, "tz": body.time_zone, "os": body.os_version,
                            "ct": json.dumps([t.model_dump() for t in body.cpu_types])}).scalar_one()
    return system(session, name)


def change_system(session: Session, name: str, body: SystemUpdate) -> SystemChange:
    changes: dict[str, Any] = body.model_dump(exclude_unset=True)
    result = session.execute(text("SELECT measure.config_system_set(:s, CAST(:c AS jsonb))"),
                             {"s": name, "c": json.dumps(changes)}).scalar_one()
    return SystemChange(system=system(session, result["system"]), recondensed=result["recondensed"])


def remove_system(session: Session, name: str) -> SystemRemoved:
    return SystemRemoved(removed=session.execute(text("SELECT measure.config_system_remove(:s)"),
                                                 {"s": name}).scalar_one())


def calendar(session: Session, name: str) -> CalendarRead:
    return CalendarRead.model_validate(session.execute(text("SELECT measure.config_calendar_show(:s)"),
                                                       {"s": name}).scalar_one())


def set_calendar(session: Session, name: str, effective_from: date, body: CalendarVersionWrite) -> CalendarChange:
    result = session.execute(
        text("SELECT measure.config_calendar_set(:s, :d, CAST(:sh AS jsonb), :hs, :hn)"),
        {"s": name, "d": effective_from, "sh": json.dumps([s.model_dump() for s in body.shifts]),
         "hs": body.holiday_shift, "hn": body.holiday_name}).scalar_one()
    return CalendarChange.model_validate(result)


def remove_calendar(session: Session, name: str, effective_from: date) -> CalendarChange:
    result = session.execute(text("SELECT measure.config_calendar_remove(:s, :d)"),
                             {"s": name, "d": effective_from}).scalar_one()
    return CalendarChange.model_validate(result)


def set_holiday(session: Session, name: str, day: date, holiday_name: str) -> HolidayChange:
    result = session.execute(text("SELECT measure.config_holiday_set(:s, :d, :n)"),
                             {"s": name, "d": day, "n": holiday_name}).scalar_one()
    return HolidayChange.model_validate(result)


def remove_holiday(session: Session, name: str, day: date) -> HolidayChange:
    result = session.execute(text("SELECT measure.config_holiday_remove(:s, :d)"), {"s": name, "d": day}).scalar_one()
    return HolidayChange.model_validate(result)


def thresholds(session: Session, name: str | None) -> ThresholdPage:
    rows = session.execute(text(
        "SELECT system_name AS system, entity, item, operator, shift_no AS shift, limit_value AS limit, enabled, "
        "help, in_force, source FROM measure.config_threshold_list(:s)"), {"s": name}).mappings().all()
    return ThresholdPage(items=[ThresholdRead.model_validate(dict(r)) for r in rows])


def _number(value: float) -> str:
    """The shortest text of a float (70.0 -> '70': the limit shows as '> 70', as typed)."""
    out = repr(value)
    return out[:-2] if out.endswith(".0") else out


def set_threshold(session: Session, body: ThresholdWrite) -> ThresholdChange:
    result = session.execute(
        text("SELECT measure.config_threshold_set(:s, :e, :i, :o, CAST(:l AS numeric), :sh, :en, :h)"),
        {"s": body.system, "e": body.entity, "i": body.item, "o": body.operator, "l": _number(body.limit),
         "sh": body.shift, "en": body.enabled, "h": body.help}).scalar_one()
    return ThresholdChange.model_validate(result)


def remove_threshold(session: Session, name: str | None, entity: str, item: str, operator: str,
                     shift: int | None) -> ThresholdRemoved:
    result = session.execute(text("SELECT measure.config_threshold_remove(:s, :e, :i, :o, :sh)"),
                             {"s": name, "e": entity, "i": item, "o": operator, "sh": shift}).scalar_one()
    return ThresholdRemoved.model_validate(result)
