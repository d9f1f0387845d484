"""User-defined counters: MEASCOUNTERBUMPINIT / MEASCOUNTERBUMP shapes."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.contract import JsonInt, json_range
from api.patterns import COUNTER_NAME, PROCESS_NAME, PROGRAM_FILE

BumpOp = Literal["INC", "ADD", "SETBUSY", "RESETBUSY", "INCQUEUE", "DEQUEUE"]


class UserCounterRef(BaseModel):
    """One element of a user counter in one process (USERDEF identifying fields)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    system: str | None = Field(default=None, max_length=16, description="default: the only system")
    cpu: JsonInt = Field(ge=0, le=15)
    pin: JsonInt = Field(ge=0, le=65535)
    name: str = Field(pattern=COUNTER_NAME, examples=["REQUESTS"])
    index: JsonInt = Field(default=0, ge=0, le=255, description="array element (ARRAY n: 0..n)")
    process_name: str | None = Field(default=None, pattern=PROCESS_NAME,
                                     description="the process's name, matched by USERDEF $name")
    program_file_name: str | None = Field(
        default=None, max_length=26, pattern=PROGRAM_FILE,
        description="its program file, matched by USERDEF $vol.subvol.file specs")


class BumpInitCreate(UserCounterRef):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [
        {"cpu": 2, "pin": 45, "name": "REQUESTS"}]})


class BumpInitRead(BaseModel):
    offset: int = Field(description="the counter's offset for bumps, or -1 when no active "
                                    "measurement has the counter (ERR^UDCNOTPRESENT)")


class BumpCreate(UserCounterRef):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [
        {"cpu": 2, "pin": 45, "name": "REQUESTS", "op": "ADD", "value": 3}]})

    offset: Annotated[int, *json_range(0, 2**31 - 1)] | None = Field(default=None, description="from bump-init")
    op: BumpOp
    value: JsonInt = Field(default=1, ge=0, le=2**53, description="amount for ADD")


class BumpRead(BaseModel):
    bumped: bool = Field(description="false when no active measurement measures the counter")
