"""Bodies and answers of /admin/systems, /admin/thresholds and the analysis settings (api/configuration/router.py)."""

from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.contract import json_range
from api.patterns import THRESHOLD_SOURCE
from core.catalog import load_catalog
from core.configuration import COMPONENTS, MATCH_ON

# an entity type with thresholds: one with tiers (the catalogue's, in its order); the type
# checker, which cannot read the catalogue, sees the str these are
if TYPE_CHECKING:
    Entity = str
else:
    Entity = Literal[load_catalog().tiered_names]
Operator = Literal[">", ">=", "<", "<="]


class CpuType(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    cpu: int | None = Field(default=None, ge=0, le=15, description="the CPU number (null: every CPU not listed)")
    cpu_type: str = Field(max_length=16, description="NONSTOP-I, NONSTOP-II, TXP, VLX, EXT10, EXT25, CLX or "
                                                     "CYCLONE", examples=["VLX"])


class SystemRead(BaseModel):
    name: str = Field(examples=["\\DEMO"])
    number: int = Field(description="the Expand node number")
    time_zone: str = Field(description="every shift, day and month is cut in it", examples=["Europe/Berlin"])
    os_version: str = Field(examples=["B30"])
    cpu_types: list[CpuType]
    collector: str | None = Field(description="the collector that registers the system (its node file sets "
                                              "the name and time zone)")
    measurements: int
    first_hour: datetime | None = Field(description="the first hour with data")
    last_hour: datetime | None = Field(description="the last hour with data")
    calendars: int = Field(description="calendar versions")
    holidays: int
    thresholds: int = Field(description="thresholds of its own")
    created_at: datetime


class SystemPage(BaseModel):
    items: list[SystemRead]


class SystemCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(max_length=16, description="a backslash, a letter and up to 6 letters or digits (the "
                                                 "backslash and upper case may be left out)", examples=["\\DEMO"])
    number: int = Field(ge=0, le=254, description="the Expand node number")
    time_zone: str = Field(max_length=64, description="an IANA time zone name", examples=["Europe/Berlin"])
    os_version: str = Field(default="B30", max_length=8, examples=["B30"])
    cpu_types: list[CpuType] = Field(default_factory=list, max_length=17)


class SystemUpdate(BaseModel):
    """The fields to change; those left out stay. A new time zone recondenses every shift day."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str | None = Field(default=None, max_length=16)
    number: int | None = Field(default=None, ge=0, le=254)
    time_zone: str | None = Field(default=None, max_length=64)
    os_version: str | None = Field(default=None, max_length=8)
    cpu_types: list[CpuType] | None = Field(default=None, max_length=17)


class Recondensed(BaseModel):
    """What a change of past shifts recondensed: the shift days with data whose shifts it
    changed and their hours (as they were or are now in a shift)."""

    days: int
    hours: int
    first_day: date | None
    last_day: date | None


class SystemChange(BaseModel):
    system: SystemRead
    recondensed: Recondensed | None = Field(description="only when the time zone changed")


class SystemRemoved(BaseModel):
    removed: str = Field(examples=["\\TEST"])


class ShiftRead(BaseModel):
    shift_no: int
    name: str
    weekdays: list[int] = Field(description="ISO weekdays, 1 = Monday")
    begin: str = Field(examples=["07:00"])
    end: str = Field(examples=["15:00"])
    crosses_midnight: bool = Field(description="it ends the next day and belongs to the day it began")


class BaseShifts(BaseModel):
    source: Literal["system", "default"] = Field(description="the system's own base shifts or the defaults")
    until: date | None = Field(description="the last day they apply (the day before the first version)")
    shifts: list[ShiftRead]


class CalendarVersionRead(BaseModel):
    effective_from: date
    until: date | None = Field(description="the day before the next version")
    holiday_shift: int | None = Field(description="the shift of a holiday's hours (null: no shift)")
    holiday_name: str
    shifts: list[ShiftRead]


class HolidayRead(BaseModel):
    day: date
    name: str


class CalendarRead(BaseModel):
    system: str
    time_zone: str
    base: BaseShifts
    versions: list[CalendarVersionRead]
    holidays: list[HolidayRead]


class ShiftWrite(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    shift_no: int = Field(ge=1, le=9)
    name: str = Field(default="", max_length=32)
    weekdays: list[int] | None = Field(default=None, min_length=1, max_length=7,
                                       description="ISO weekdays, 1 = Monday (null: every day)", examples=[[1, 2, 3, 4, 5]])
    begin: str = Field(max_length=5, description="a whole hour, 00:00 to 23:00", examples=["07:00"])
    end: str = Field(max_length=5, description="a whole hour, 00:00 to 24:00; not after begin: the shift "
                                               "crosses midnight", examples=["15:00"])


class CalendarVersionWrite(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    shifts: list[ShiftWrite] = Field(min_length=1, max_length=63)
    holiday_shift: int | None = Field(default=None, ge=1, le=9, description="the shift of a holiday's hours "
                                                                            "(null: they belong to no shift)")
    holiday_name: str = Field(default="holiday", max_length=32)


class CalendarChange(BaseModel):
    system: str
    effective_from: date
    recondensed: Recondensed


class HolidayWrite(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(default="", max_length=64, examples=["Christmas"])


class HolidayChange(BaseModel):
    system: str
    day: date
    name: str | None = None
    recondensed: Recondensed


class ThresholdRead(BaseModel):
    system: str | None = Field(description="null: a default (of every system without its own)")
    entity: Entity
    item: str = Field(description="a column of measure.<entity>_hour", examples=["busy_max"])
    operator: Operator
    shift: int | None = Field(description="null: every shift")
    limit: float
    enabled: bool
    help: str
    in_force: bool = Field(description="the system takes it (with ?system=; else: enabled)")
    source: str = Field(description="system; default; default (replaced in shift 3, …): a more specific row "
                                    "decides those shifts; default (replaced): the system takes it for none",
                        pattern=THRESHOLD_SOURCE)


class ThresholdPage(BaseModel):
    items: list[ThresholdRead]


class ThresholdWrite(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    system: str | None = Field(default=None, max_length=16, description="null: the default of every system "
                                                                       "without its own")
    entity: Entity
    item: str = Field(max_length=63, description="a numeric column of measure.<entity>_hour", examples=["busy_max"])
    operator: Operator
    limit: float = Field(allow_inf_nan=False, examples=[70])
    shift: int | None = Field(default=None, ge=1, le=9, description="only the hours of this shift (null: every "
                                                                   "shift without a threshold of its own)")
    enabled: bool = Field(default=True, description="false: switched off (a system's row: its default too)")
    help: str | None = Field(default=None, max_length=200, description="null: keep the stored help")


class ThresholdStored(BaseModel):
    system: str | None
    entity: Entity
    item: str
    operator: Operator
    shift: int | None
    limit: float
    enabled: bool
    help: str


class Reevaluated(BaseModel):
    """The stored violations (threshold report lines, threshold rollups) re-resolved in the same
    transaction: the hours of the entity type of every system the change applies to."""

    systems: int
    hours: int


class ThresholdChange(BaseModel):
    threshold: ThresholdStored
    reevaluated: Reevaluated


class ThresholdKey(BaseModel):
    system: str | None
    entity: Entity
    item: str
    operator: Operator
    shift: int | None


class ThresholdRemoved(BaseModel):
    removed: ThresholdKey
    reevaluated: Reevaluated


# ---------------------------------------------------------------- components

# core.configuration's one list of each; a str to the type checker (as Entity above)
if TYPE_CHECKING:
    Component = str
    MatchOn = str
else:
    Component = Literal[COMPONENTS]
    MatchOn = Literal[MATCH_ON]


class ComponentRead(BaseModel):
    system: str | None = Field(description="null: a default (of every system)")
    priority: int = Field(description="rows are tried lowest first")
    match_on: MatchOn
    pattern: str = Field(description="SQL LIKE pattern on the upper-case name", examples=["$APPL.%"])
    component: Component
    source: Literal["system", "default"]


class ComponentPage(BaseModel):
    items: list[ComponentRead]


class ComponentWrite(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    system: str | None = Field(default=None, max_length=16, description="null: a default of every system")
    match_on: MatchOn = "program_file_name"
    pattern: str = Field(min_length=1, max_length=128, examples=["$APPL.%"])
    component: Component
    priority: Annotated[int, *json_range(0, 32767)] = Field(default=100, description="rows are tried lowest first")


class ComponentStored(BaseModel):
    system: str | None
    match_on: MatchOn
    pattern: str
    component: Component
    priority: int


class ComponentKey(BaseModel):
    system: str | None
    match_on: MatchOn
    pattern: str


# ---------------------------------------------------------------- analysis settings

class AnalysisSetting(BaseModel):
    setting: Literal["weeks", "minor", "major", "relative_floor"] = Field(
        description="weeks: the earlier weeks a baseline learns from; minor, major: the bands in robust standard "
                    "deviations; relative_floor: the smallest band as a share of the median")
    value: float
    default: float
    source: Literal["system", "default"] = Field(description="system: its own value; default: the default's")


class BaselineFloor(BaseModel):
    entity: str = Field(examples=["cpu"])
    item: str = Field(examples=["busy"])
    floor: float = Field(description="the smallest half-width of the minor band, in the item's unit")


class HealthIndicator(BaseModel):
    indicator: str = Field(examples=["cpu_over_utilised"])
    limit: float
    weight: int = Field(description="subtracted from 100 in the score when the problem is present")
    symptom: str


class AnalysisRead(BaseModel):
    """A system's settings of the automatic analysis (docs/analysis.md), and the baseline items'
    floors and the health verdict's indicators every system takes."""

    system: str = Field(examples=["\\DEMO"])
    settings: list[AnalysisSetting]
    floors: list[BaselineFloor]
    indicators: list[HealthIndicator]


class Rejudged(BaseModel):
    """The baselines rebuilt in the same transaction: the systems, their stored hours judged
    again and the rows stored (all 0: what the baselines learn did not change)."""

    systems: int
    hours: int
    rows: int


class AnalysisChange(AnalysisRead):
    rejudged: Rejudged


class AnalysisWrite(BaseModel):
    """The settings to change; those left out stay."""

    model_config = ConfigDict(extra="forbid", strict=True)

    weeks: Annotated[int, *json_range(1, 52)] | None = Field(default=None, description="the earlier weeks a "
                                                                                      "baseline learns from")
    minor: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="the minor band, in robust "
                                                                                     "standard deviations")
    major: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="the major band (above the "
                                                                                     "minor)")
    relative_floor: float | None = Field(default=None, ge=0, allow_inf_nan=False,
                                         description="the smallest band as a share of the median")


class FloorWrite(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    floor: float = Field(gt=0, allow_inf_nan=False, description="in the item's unit", examples=[10])


class FloorChange(BaseModel):
    floor: BaselineFloor
    rejudged: Rejudged


class IndicatorWrite(BaseModel):
    """The limit, the weight or both (null or left out: as it is)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    limit: float | None = Field(default=None, ge=0, allow_inf_nan=False, examples=[70])
    weight: Annotated[int, *json_range(0, 100)] | None = Field(default=None, description="the weights of all "
                                                                                        "indicators add up to at "
                                                                                        "most 100")


class IndicatorChange(BaseModel):
    indicator: HealthIndicator
    weights: int = Field(description="the sum of all indicators' weights")
