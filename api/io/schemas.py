"""Import and export shapes."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from api.errors import ErrorRead


class ExportEntity(StrEnum):
    """Entity types (schema/catalog/entities.csv); tiers exist for cpu, disc, line, process,
    userdef and tmf."""

    cpu = "cpu"
    process = "process"
    processh = "processh"
    userdef = "userdef"
    file = "file"
    discopen = "discopen"
    disc = "disc"
    device = "device"
    line = "line"
    netline = "netline"
    system = "system"
    cluster = "cluster"
    terminal = "terminal"
    tmf = "tmf"


class ExportKind(StrEnum):
    """interval records, or a tier of the performance data base."""

    interval = "interval"
    hour = "hour"
    shift = "shift"
    month = "month"
    year = "year"


class TimeFormat(StrEnum):
    """FROM-/TO-TIMESTAMP of exported interval records: ISO 8601 local time with UTC offset, or
    MEASURE Julian microseconds (local civil time)."""

    iso = "iso"
    julian = "julian"


class ImportRead(BaseModel):
    """What an import did (in one transaction; the tiers of the hours written are current)."""

    entity: str = Field(description="MEASURE name of the entity type", examples=["CPU"])
    rows: int = Field(description="data rows read")
    stored: int = Field(description="interval records stored")
    unchanged: int = Field(description="rows already stored with the same values (skipped)")
    duplicates: int = Field(description="rows repeated in the file with the same values")
    hours: int = Field(description="UTC hours written")
    hours_condensed: int = Field(description="hours condensed into the tiers (with shifts, months, years)")
    systems: list[str] = Field(examples=[["\\DEMO"]])
    measurements: list[str] = Field(description="the measurements the rows went to; (new) when created",
                                    examples=[["IMPORT (new)"]])
    missing_counters: list[str] = Field(description="counters the file has no column for (stored as 0)")
    ignored_columns: list[str] = Field(description="MEASURE header fields not stored (LOADID …)")


class ImportProblemRead(BaseModel):
    line: int = Field(description="line in the file (the header is line 1)", examples=[7])
    field: str = Field(description="the column (or row, header, file)", examples=["CPU-BUSY-TIME"])
    problem: str = Field(examples=["not an integer: '1.5'"])


class ImportFailedRead(ErrorRead):
    """422: bad rows (nothing was stored), with bad_rows and problems; or a bad parameter."""

    bad_rows: int | None = Field(default=None, description="bad rows in all (problems lists the first ones); "
                                                          "0: the header or the file itself")
    problems: list[ImportProblemRead] | None = Field(default=None, description="every problem of the first bad rows")
