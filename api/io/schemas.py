"""Import and export shapes."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from api.errors import ErrorRead
from core.catalog import TIERS, load_catalog

_CATALOG = load_catalog()
# every entity type of the catalogue, in its order (never restated here)
ExportEntity = StrEnum("ExportEntity", {e.name: e.name for e in _CATALOG})  # type: ignore[misc]  # an enum of names from the catalogue (functional API)
ExportEntity.__doc__ = ("Entity types (schema/catalog/entities.csv); tiers exist for "
                        f"{', '.join(_CATALOG.tiered_names[:-1])} and {_CATALOG.tiered_names[-1]}.")
# interval records, or a tier of the performance data base
ExportKind = StrEnum("ExportKind", {k: k for k in ("interval", *TIERS)})  # type: ignore[misc]  # an enum of names from the catalogue (functional API)
ExportKind.__doc__ = "interval records, or a tier of the performance data base."


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
