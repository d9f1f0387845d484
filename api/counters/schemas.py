"""Counter-read shapes: …Query (query parameters), …Read / …Page (responses)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from api.contract import Instant
from api.patterns import DESCRIPTOR

Relop = Literal["=", "<>", "<", ">", "<=", ">="]

IDS_DESCRIPTION = ("descriptor fields as field:value (repeat the parameter), wildcards '*' as in "
                   "CONTAB; absent = every entity of the type. E.g. ids=cpu:3, "
                   "ids=process_name:$DB1, ids=file_name:$DATA.*.*")
IdField = Annotated[str, StringConstraints(pattern=DESCRIPTOR,
                                           max_length=128)]
CounterName = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class CounterReadQuery(BaseModel):
    """MEASREAD / MEASREAD_DIFF_ / LISTALL parameters (collector/measure/read.py)."""

    model_config = ConfigDict(extra="forbid")

    ids: list[IdField] = Field(default_factory=list, description=IDS_DESCRIPTION, max_length=16,
                               examples=[["cpu:3"]])
    counters: list[CounterName] = Field(default_factory=list, max_length=300,
                                        description="counter names (MEASURE or snake); none = all",
                                        examples=[["CPU-BUSY-TIME", "dispatches"]])
    from_at: Instant | None = Field(default=None, description="window start (FROM); summary record")
    to_at: Instant | None = Field(default=None, description="window end (TO)")
    at: Instant | None = Field(default=None, description="target time: the record whose TO is closest")
    tolerance_seconds: float | None = Field(default=None, ge=0, le=10 * 366 * 86400,
                                            description="± tolerance around `at`")
    all_records: bool = Field(default=False, description="LISTALL: every interval record in the window")
    rate: bool = Field(default=True, description="RATE ON (per second, busy %, queue length, avg response)")
    by: str | None = Field(default=None, min_length=1, max_length=64, description="BY counter (highest first)")
    descending: bool = Field(default=True, description="with BY: highest first")
    if_counter: str | None = Field(default=None, min_length=1, max_length=64, description="IF counter …")
    if_op: Relop | None = Field(default=None, description="… relop …")
    if_value: float | None = Field(default=None, allow_inf_nan=False, description="… value")
    zero_reports: bool = Field(default=True, description="false: drop all-zero records")
    limit: int = Field(default=100, ge=1, le=1000)
    cursor: str | None = Field(default=None, min_length=1, max_length=512,
                               description="next_cursor of the previous page")


class CounterColumnRead(BaseModel):
    name: str = Field(examples=["cpu_busy_time"])
    measure_name: str = Field(examples=["CPU-BUSY-TIME"])
    kind: str = Field(examples=["busy"])
    unit: str = Field(description="unit of the values shown (RATE ON: %, events/s …)", examples=["%"])


class CounterRecordRead(BaseModel):
    entity_key: str = Field(examples=["cpu=3"])
    ids: dict[str, Any] = Field(examples=[{"cpu": 3}])
    cpu: int | None
    from_at: datetime = Field(description="FROM-TIMESTAMP")
    to_at: datetime = Field(description="TO-TIMESTAMP")
    delta_seconds: float = Field(description="DELTA-TIME (measured time) in seconds")
    intervals: int = Field(description="interval records summed into this record")
    values: dict[str, float | int | None] = Field(
        description="counter (snake name) → value; null where RATE ON divides by zero",
        examples=[{"cpu_busy_time": 42.5}])


class CounterReadPage(BaseModel):
    measurement_id: int | None
    entity: str
    mode: Literal["latest", "nearest", "summary", "intervals", "active"]
    rate: bool
    counters: list[CounterColumnRead]
    records: list[CounterRecordRead]
    next_cursor: str | None = Field(description="pass as cursor for the next page; null at the end")


class ActiveReadQuery(BaseModel):
    """MEASREADACTIVE / LISTACTIVE parameters."""

    model_config = ConfigDict(extra="forbid")

    ids: list[IdField] = Field(default_factory=list, description=IDS_DESCRIPTION, max_length=16)
    counters: list[CounterName] = Field(default_factory=list, max_length=300,
                                        description="counter names (MEASURE or snake); none = all")
    measurement_id: int | None = Field(default=None, ge=1, le=2_147_483_647,
                                       description="read the records of this measurement")
    system: str | None = Field(default=None, max_length=16)
    rate: bool = True


class EntityTypeRead(BaseModel):
    entity: str = Field(examples=["cpu"])
    measure_name: str = Field(examples=["CPU"])
    type_code: int
    id_fields: list[str]
    help: str


class CounterDefRead(BaseModel):
    name: str
    measure_name: str
    kind: str
    unit: str
    rate_unit: str
    position: int = Field(description="1-based position in the stored counters[] array")
    help: str
