"""/admin/systems, /admin/thresholds, /admin/components and the analysis settings: the platform's configuration for
admin tokens (measuredb token create NAME --scope admin); the same as `measuredb system | calendar | threshold |
analysis`.

Systems (name, Expand node number, time zone, OS version, CPU types); per system its calendar:
shifts per ISO weekday (a shift whose end is not after its begin crosses midnight and belongs to
the day it began), calendar versions that apply from a date on, holidays (their hours belong to
the version's holiday shift, or to no shift); thresholds per entity type, item (a column of
measure.<entity>_hour, as the ENFORM threshold report reads it) and shift. Every write is one
transaction: bad input is 422 naming the field and applies nothing; a change of past shifts
recondenses exactly the shift days it alters and says how many (`recondensed`); a threshold
change re-resolves the stored violations it affects and says how many hours (`reevaluated`); a
change of what the automatic analysis learns (a system's weeks and bands, an item's floor)
rebuilds the baselines it touches and says how many hours were judged again (`rejudged`).
"""

from __future__ import annotations

from datetime import date
from typing import Annotated

from fastapi import APIRouter, Body, Path, Query

from api.auth import AdminToken
from api.configuration import service
from api.configuration.schemas import (
    AnalysisChange,
    AnalysisRead,
    AnalysisWrite,
    CalendarChange,
    CalendarRead,
    CalendarVersionWrite,
    ComponentKey,
    ComponentPage,
    ComponentStored,
    ComponentWrite,
    Entity,
    FloorChange,
    FloorWrite,
    HolidayChange,
    HolidayWrite,
    IndicatorChange,
    IndicatorWrite,
    MatchOn,
    Operator,
    SystemChange,
    SystemCreate,
    SystemPage,
    SystemRead,
    SystemRemoved,
    SystemUpdate,
    ThresholdChange,
    ThresholdPage,
    ThresholdRemoved,
    ThresholdWrite,
)
from api.db import SessionDep
from api.errors import Conflict, Forbidden, InvalidInput, NotFound, Unauthorized, responses

router = APIRouter(prefix="/admin", tags=["admin"])
ADMIN_ERRORS = (Unauthorized, Forbidden)
SystemName = Annotated[str, Path(max_length=16, description="the system's name (\\DEMO; the backslash and upper "
                                                            "case may be left out)", examples=["DEMO"])]


@router.get("/systems", response_model=SystemPage, summary="Every system",
            responses=responses(*ADMIN_ERRORS))
def get_systems(session: SessionDep, _: AdminToken) -> SystemPage:
    return service.systems(session)


@router.post("/systems", response_model=SystemRead, status_code=201, summary="Add a system",
             responses=responses(*ADMIN_ERRORS, InvalidInput, Conflict))
def post_system(session: SessionDep, _: AdminToken, body: Annotated[SystemCreate, Body()]) -> SystemRead:
    return service.add_system(session, body)


@router.get("/systems/{system}", response_model=SystemRead, summary="One system",
            responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def get_system(session: SessionDep, _: AdminToken, system: SystemName) -> SystemRead:
    return service.system(session, system)


@router.put("/systems/{system}", response_model=SystemChange,
            summary="Change a system's fields: those given (the others stay; a new time zone recondenses "
                    "every shift day)",
            responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound, Conflict))
def put_system(session: SessionDep, _: AdminToken, system: SystemName,
                 body: Annotated[SystemUpdate, Body()]) -> SystemChange:
    return service.change_system(session, system, body)


@router.delete("/systems/{system}", response_model=SystemRemoved, summary="Remove a system never measured",
               responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound, Conflict))
def delete_system(session: SessionDep, _: AdminToken, system: SystemName) -> SystemRemoved:
    return service.remove_system(session, system)


@router.get("/systems/{system}/calendar", response_model=CalendarRead,
            summary="A system's shifts, calendar versions and holidays",
            responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def get_calendar(session: SessionDep, _: AdminToken, system: SystemName) -> CalendarRead:
    return service.calendar(session, system)


@router.put("/systems/{system}/calendar/{effective_from}", response_model=CalendarChange,
            summary="Set the calendar version that applies from a date on (recondenses the days it changes)",
            responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def put_calendar(session: SessionDep, _: AdminToken, system: SystemName,
                 effective_from: Annotated[date, Path(description="the first shift day it applies to")],
                 body: Annotated[CalendarVersionWrite, Body()]) -> CalendarChange:
    return service.set_calendar(session, system, effective_from, body)


@router.delete("/systems/{system}/calendar/{effective_from}", response_model=CalendarChange,
               summary="Remove a calendar version (recondenses the days it changes)",
               responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def delete_calendar(session: SessionDep, _: AdminToken, system: SystemName,
                    effective_from: Annotated[date, Path()]) -> CalendarChange:
    return service.remove_calendar(session, system, effective_from)


@router.put("/systems/{system}/holidays/{day}", response_model=HolidayChange,
            summary="Make a day a holiday (recondenses the days it changes)",
            responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def put_holiday(session: SessionDep, _: AdminToken, system: SystemName, day: Annotated[date, Path()],
                body: Annotated[HolidayWrite, Body()]) -> HolidayChange:
    return service.set_holiday(session, system, day, body.name)


@router.delete("/systems/{system}/holidays/{day}", response_model=HolidayChange,
               summary="Make a holiday an ordinary day (recondenses the days it changes)",
               responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def delete_holiday(session: SessionDep, _: AdminToken, system: SystemName,
                   day: Annotated[date, Path()]) -> HolidayChange:
    return service.remove_holiday(session, system, day)


@router.get("/systems/{system}/analysis", response_model=AnalysisRead,
            summary="A system's settings of the automatic analysis (with their defaults), the item floors and "
                    "the health indicators",
            responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def get_analysis(session: SessionDep, _: AdminToken, system: SystemName) -> AnalysisRead:
    return service.analysis(session, system)


@router.put("/systems/{system}/analysis", response_model=AnalysisChange,
            summary="Change some of a system's analysis settings (rebuilds its baselines: the hours judged again)",
            responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def put_analysis(session: SessionDep, _: AdminToken, system: SystemName,
                 body: Annotated[AnalysisWrite, Body()]) -> AnalysisChange:
    return service.set_analysis(session, system, body)


@router.delete("/systems/{system}/analysis", response_model=AnalysisChange,
               summary="A system's analysis settings back to the defaults (rebuilds its baselines)",
               responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def delete_analysis(session: SessionDep, _: AdminToken, system: SystemName) -> AnalysisChange:
    return service.reset_analysis(session, system)


@router.put("/analysis/floors/{entity}/{item}", response_model=FloorChange,
            summary="Set a baseline item's floor, every system's (rebuilds every system's baselines)",
            responses=responses(*ADMIN_ERRORS, InvalidInput))
def put_analysis_floor(session: SessionDep, _: AdminToken,
                       entity: Annotated[str, Path(max_length=32, examples=["cpu"])],
                       item: Annotated[str, Path(max_length=63, examples=["busy"])],
                       body: Annotated[FloorWrite, Body()]) -> FloorChange:
    return service.set_analysis_floor(session, entity, item, body.floor)


@router.put("/analysis/indicators/{indicator}", response_model=IndicatorChange,
            summary="Set a health indicator's limit or weight, every system's (the verdict reads them when it runs)",
            responses=responses(*ADMIN_ERRORS, InvalidInput))
def put_analysis_indicator(session: SessionDep, _: AdminToken,
                           indicator: Annotated[str, Path(max_length=63, examples=["cpu_over_utilised"])],
                           body: Annotated[IndicatorWrite, Body()]) -> IndicatorChange:
    return service.set_analysis_indicator(session, indicator, body)


@router.get("/thresholds", response_model=ThresholdPage,
            summary="The thresholds a system takes, or every stored threshold",
            responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def get_thresholds(session: SessionDep, _: AdminToken,
                   system: Annotated[str | None, Query(max_length=16, description="the system (default: every "
                                                                                  "stored row)")] = None
                   ) -> ThresholdPage:
    return service.thresholds(session, system)


@router.put("/thresholds", response_model=ThresholdChange,
            summary="Set a threshold (re-resolves the stored violations it affects)",
            responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def put_threshold(session: SessionDep, _: AdminToken, body: Annotated[ThresholdWrite, Body()]) -> ThresholdChange:
    return service.set_threshold(session, body)


@router.delete("/thresholds", response_model=ThresholdRemoved,
               summary="Remove a threshold (re-resolves the stored violations it affects)",
               responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def delete_threshold(session: SessionDep, _: AdminToken, entity: Annotated[Entity, Query()],
                     item: Annotated[str, Query(max_length=63)], operator: Annotated[Operator, Query()],
                     system: Annotated[str | None, Query(max_length=16)] = None,
                     shift: Annotated[int | None, Query(ge=1, le=9)] = None) -> ThresholdRemoved:
    return service.remove_threshold(session, system, entity, item, operator, shift)


@router.get("/components", response_model=ComponentPage,
            summary="Which process is which component of the transaction-resource report",
            responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def get_components(session: SessionDep, _: AdminToken,
                   system: Annotated[str | None, Query(max_length=16, description="the system: its rows and the "
                                                                                  "defaults, in the order they are "
                                                                                  "tried (default: every row)")] = None
                   ) -> ComponentPage:
    return service.components(session, system)


@router.put("/components", response_model=ComponentStored,
            summary="Set a component row (the transaction-resource report reads it when it runs)",
            responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def put_component(session: SessionDep, _: AdminToken, body: Annotated[ComponentWrite, Body()]) -> ComponentStored:
    return service.set_component(session, body)


@router.delete("/components", response_model=ComponentKey, summary="Remove a component row",
               responses=responses(*ADMIN_ERRORS, InvalidInput, NotFound))
def delete_component(session: SessionDep, _: AdminToken, pattern: Annotated[str, Query(min_length=1, max_length=128)],
                     match_on: Annotated[MatchOn, Query()] = "program_file_name",
                     system: Annotated[str | None, Query(max_length=16)] = None) -> ComponentKey:
    return service.remove_component(session, system, match_on, pattern)
