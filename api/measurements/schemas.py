"""Measurement shapes: …Create / …Start / …Stop in, …Read / …Page out (style P8)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.contract import Instant, json_range
from api.patterns import MEASUREMENT
from collector.measure.contab import Contab

State = Literal["configured", "scheduled", "running", "stopped", "failed"]

CONTAB_EXAMPLE: dict[str, Any] = {
    "descriptors": [{"type": "CPU"}, {"type": "DISC", "fields": {"device_name": "$DATA1"}},
                    {"type": "CPU", "fields": {"cpu": 6}, "exclude": True}],
    "counters": [],
}
MEASCOM_EXAMPLE = ("ADD CPU *\nDELETE CPU 6\nADD DISC $DATA1\nADD MEASUREMENT CPLNDAY1\n"
                   "START MEASUREMENT CPLNDAY1, FOR 8 HOURS, INTERVAL 15 MINUTES")


class MeasurementCreate(BaseModel):
    """A new measurement from a CONTAB (JSON) or from MEASCOM text (ADD entity/COUNTER,
    DELETE, VOLUME, ADD MEASUREMENT, START MEASUREMENT with FROM/TO/FOR/INTERVAL)."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [
        {"name": "CPLNDAY1", "contab": CONTAB_EXAMPLE, "start": True, "for_seconds": 28800,
         "interval_seconds": 900},
        {"meascom": MEASCOM_EXAMPLE},
    ]})

    name: str | None = Field(default=None, description="data file name (MEASCOM: ADD MEASUREMENT)",
                             examples=["CPLNDAY1"], pattern=MEASUREMENT)
    system: str | None = Field(default=None, description="system name, e.g. \\DEMO; default: the only one",
                               max_length=16)
    contab: Contab | None = Field(default=None, description="entity descriptors and user counters")
    meascom: str | None = Field(default=None, description="MEASCOM commands", max_length=100_000)
    start: bool = Field(default=False, description="start now (when start_at is not given)")
    start_at: Instant | None = Field(default=None, description="START … FROM")
    stop_at: Instant | None = Field(default=None, description="START … TO")
    for_seconds: Annotated[int, *json_range(1, 10 * 366 * 86400)] | None = Field(default=None, description="START … FOR")
    interval_seconds: Annotated[int, *json_range(1, 86400)] | None = Field(default=None, description="START … INTERVAL")


class MeasurementStart(BaseModel):
    """START MEASUREMENT of a configured measurement. FOR and TO exclude each other."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [
        {"for_seconds": 3600, "interval_seconds": 60}]})

    start_at: Instant | None = Field(default=None, description="FROM; default now")
    stop_at: Instant | None = Field(default=None, description="TO")
    for_seconds: Annotated[int, *json_range(1, 10 * 366 * 86400)] | None = Field(default=None, description="FOR")
    interval_seconds: Annotated[int, *json_range(1, 86400)] | None = Field(default=None, description="INTERVAL")


class MeasurementStop(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    stop_at: Instant | None = Field(default=None, description="when to stop; default now")


class MeasurementRead(BaseModel):
    measurement_id: int
    system_name: str
    name: str
    state: State
    state_detail: str | None
    start_at: datetime | None
    stop_at: datetime | None
    interval_seconds: float | None
    started_at: datetime | None
    stopped_at: datetime | None
    created_at: datetime
    updated_at: datetime
    source: str | None = Field(description="the MEASCOM text it was made from, if any")


class MeasurementPage(BaseModel):
    items: list[MeasurementRead]
    next_cursor: str | None = Field(description="pass as cursor for the next page; null at the end")


class MeasurementStatusRead(BaseModel):
    """MEASSTATUS. ``collector`` is the running collector's answer (entities measured per type,
    counter-space words, CIDs, copies written, records not allocated by error); null for a
    measurement that was never started."""

    measurement_id: int
    name: str
    state: State
    collector: dict[str, Any] | None


class MeasurementConfigurationRead(BaseModel):
    """MEASREADCONF, and the configuration as MEASCOM commands (INFO MEASUREMENT)."""

    measurement_id: int
    name: str
    contab: Contab
    commands: list[str] = Field(examples=[["ADD CPU *", "DELETE CPU 6", "ADD MEASUREMENT CPLNDAY1"]])
    start_at: datetime | None
    stop_at: datetime | None
    interval_seconds: float | None
