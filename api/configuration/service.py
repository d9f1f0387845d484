"""Configuration for admin tokens: the functions of core/configuration.py (the same as
`measuredb system | calendar | threshold | analysis`) in the request's transaction, their answers as the
API's shapes; their errors (core.errors, naming the field) reach the client through
api/errors.py."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from sqlalchemy.orm import Session

from api.configuration.schemas import (
    AnalysisChange,
    AnalysisRead,
    AnalysisWrite,
    CalendarChange,
    CalendarRead,
    CalendarVersionWrite,
    ComponentKey,
    ComponentPage,
    ComponentRead,
    ComponentStored,
    ComponentWrite,
    FloorChange,
    HolidayChange,
    IndicatorChange,
    IndicatorWrite,
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
from api.db import psycopg_connection
from core import configuration


def systems(session: Session) -> SystemPage:
    return SystemPage(items=[SystemRead.model_validate(r) for r in configuration.systems(psycopg_connection(session))])


def system(session: Session, name: str) -> SystemRead:
    return SystemRead.model_validate(configuration.system(psycopg_connection(session), name))


def add_system(session: Session, body: SystemCreate) -> SystemRead:
    name = configuration.add_system(psycopg_connection(session), body.name, number=body.number,
                                    time_zone=body.time_zone, os_version=body.os_version,
                                    cpu_types=[t.model_dump() for t in body.cpu_types])
    return system(session, name)


def change_system(session: Session, name: str, body: SystemUpdate) -> SystemChange:
    changes: dict[str, Any] = body.model_dump(exclude_unset=True)
    result = configuration.change_system(psycopg_connection(session), name, changes)
    return SystemChange(system=system(session, result["system"]), recondensed=result["recondensed"])


def remove_system(session: Session, name: str) -> SystemRemoved:
    return SystemRemoved(removed=configuration.remove_system(psycopg_connection(session), name))


def calendar(session: Session, name: str) -> CalendarRead:
    return CalendarRead.model_validate(configuration.calendar(psycopg_connection(session), name))


def set_calendar(session: Session, name: str, effective_from: date, body: CalendarVersionWrite) -> CalendarChange:
    return CalendarChange.model_validate(configuration.set_calendar(
        psycopg_connection(session), name, effective_from, [s.model_dump() for s in body.shifts],
        holiday_shift=body.holiday_shift, holiday_name=body.holiday_name))


def remove_calendar(session: Session, name: str, effective_from: date) -> CalendarChange:
    return CalendarChange.model_validate(configuration.remove_calendar(psycopg_connection(session), name,
                                                                       effective_from))


def set_holiday(session: Session, name: str, day: date, holiday_name: str) -> HolidayChange:
    return HolidayChange.model_validate(configuration.set_holiday(psycopg_connection(session), name, day,
                                                                  holiday_name))


def remove_holiday(session: Session, name: str, day: date) -> HolidayChange:
    return HolidayChange.model_validate(configuration.remove_holiday(psycopg_connection(session), name, day))


def thresholds(session: Session, name: str | None) -> ThresholdPage:
    return ThresholdPage(items=[ThresholdRead.model_validate(r)
                                for r in configuration.thresholds(psycopg_connection(session), name)])


def _number(value: float) -> Decimal:
    """The shortest decimal of a float (70.0 -> 70: the limit shows as '> 70', as typed)."""
    out = repr(value)
    return Decimal(out[:-2] if out.endswith(".0") else out)


def set_threshold(session: Session, body: ThresholdWrite) -> ThresholdChange:
    return ThresholdChange.model_validate(configuration.set_threshold(
        psycopg_connection(session), system=body.system, entity=body.entity, item=body.item,
        operator=body.operator, limit=_number(body.limit), shift=body.shift, enabled=body.enabled,
        help=body.help))


def remove_threshold(session: Session, name: str | None, entity: str, item: str, operator: str,
                     shift: int | None) -> ThresholdRemoved:
    return ThresholdRemoved.model_validate(configuration.remove_threshold(
        psycopg_connection(session), system=name, entity=entity, item=item, operator=operator, shift=shift))


def components(session: Session, name: str | None) -> ComponentPage:
    return ComponentPage(items=[ComponentRead.model_validate(r)
                                for r in configuration.components(psycopg_connection(session), name)])


def set_component(session: Session, body: ComponentWrite) -> ComponentStored:
    return ComponentStored.model_validate(configuration.set_component(
        psycopg_connection(session), system=body.system, match_on=body.match_on, pattern=body.pattern,
        component=body.component, priority=body.priority))


def remove_component(session: Session, name: str | None, match_on: str, pattern: str) -> ComponentKey:
    return ComponentKey.model_validate(configuration.remove_component(
        psycopg_connection(session), system=name, match_on=match_on, pattern=pattern))


def analysis(session: Session, name: str) -> AnalysisRead:
    return AnalysisRead.model_validate(configuration.analysis(psycopg_connection(session), name))


def set_analysis(session: Session, name: str, body: AnalysisWrite) -> AnalysisChange:
    return AnalysisChange.model_validate(configuration.set_analysis(
        psycopg_connection(session), name, weeks=body.weeks, minor=body.minor, major=body.major,
        relative_floor=body.relative_floor))


def reset_analysis(session: Session, name: str) -> AnalysisChange:
    return AnalysisChange.model_validate(configuration.reset_analysis(psycopg_connection(session), name))


def set_analysis_floor(session: Session, entity: str, item: str, floor: float) -> FloorChange:
    return FloorChange.model_validate(configuration.set_analysis_floor(psycopg_connection(session), entity, item,
                                                                       floor))


def set_analysis_indicator(session: Session, indicator: str, body: IndicatorWrite) -> IndicatorChange:
    return IndicatorChange.model_validate(configuration.set_analysis_indicator(
        psycopg_connection(session), indicator, limit=body.limit, weight=body.weight))
