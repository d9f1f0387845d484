"""Tier shapes: TierQuery (query parameters), TierRowRead / TierPage (responses), style P8."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from api.contract import LocalInstant
from api.patterns import SYSTEM
from core.catalog import TIERS, load_catalog

# the catalogue's entity types with tiers and its tiers, in its order (schema/catalog/entities.csv)
TierEntity = StrEnum("TierEntity", {n: n for n in load_catalog().tiered_names})  # type: ignore[misc]  # an enum of names from the catalogue (functional API)
TierEntity.__doc__ = "Entity types with performance-data-base tiers (measure.<entity>_<tier> views)."

TierName = StrEnum("TierName", {t: t for t in (*TIERS, "auto")})  # type: ignore[misc]  # an enum of names from the catalogue (functional API)
TierName.__doc__ = "hour, shift, month, year, or auto (chosen from the from/to range)."

StoredTier = StrEnum("StoredTier", {t: t for t in TIERS})  # type: ignore[misc]  # an enum of names from the catalogue (functional API)
StoredTier.__doc__ = "The tiers stored as views (every TierName but auto)."


class TierQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    system: str | None = Field(default=None, pattern=SYSTEM,
                               description="system name, e.g. \\DEMO", examples=["\\DEMO"])
    cpu: int | None = Field(default=None, ge=0, le=15, description="CPU number (not for disc)")
    volume: str | None = Field(default=None, min_length=1, max_length=32, description="disc volume, e.g. $DATA1 (disc only)")
    process: str | None = Field(default=None, min_length=1, max_length=64,
                                description="process name ($S1) or program file name "
                                            "($APPL.ET1.SERVER); process and userdef only")
    shift: int | None = Field(default=None, ge=1, le=9, description="shift number (shift, month, year tiers)")
    from_at: LocalInstant | None = Field(
        default=None, alias="from", description="start: buckets starting at or after it; a date (2026-11-17) "
        "or an ISO 8601 date-time, without an offset the system's local time", examples=["2026-11-17"])
    to_at: LocalInstant | None = Field(
        default=None, alias="to", description="end (exclusive), as from; default now for auto",
        examples=["2026-11-18"])
    limit: int = Field(default=500, ge=1, le=5000)
    cursor: str | None = Field(default=None, min_length=1, max_length=512,
                               description="next_cursor of the previous page")


class TierAutoQuery(TierQuery):
    """auto chooses the tier from the range from … to: from is required."""

    from_at: LocalInstant = Field(alias="from", description="start: buckets starting at or after it; a date "
                                  "(2026-11-17) or an ISO 8601 date-time, without an offset the system's local time",
                                  examples=["2026-11-17"])


class TierRowRead(BaseModel):
    system_name: str = Field(examples=["\\DEMO"])
    subject: dict[str, Any] = Field(description="what the row is about: cpu, volume, line, process …",
                                    examples=[{"cpu": 3}])
    bucket: dict[str, Any] = Field(description="the time bucket: hour_at/local_hour/loadid, or "
                                               "shift_day/month/year with shift_no and hours",
                                   examples=[{"hour_at": "2024-03-10T07:00:00Z",
                                              "local_hour": "2024-03-09T23:00:00", "loadid": "DT06923"}])
    values: dict[str, float | int | None] = Field(description="the view's measures (column → value)",
                                                  examples=[{"busy_avg": 70.0, "busy_max": 90.0,
                                                             "qlen_avg": 2.0}])


class TierPage(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "entity": "cpu", "tier": "hour", "requested_tier": "auto", "view": "measure.cpu_hour",
        "auto_rule": "hour up to 7 days, shift up to 120 days, month beyond",
        "items": [{"system_name": "\\DEMO", "subject": {"cpu": 0, "cpu_type": None, "os_version": "B30"},
                   "bucket": {"hour_at": "2024-03-10T07:00:00Z", "local_hour": "2024-03-09T23:00:00",
                              "loadid": "DT06923"},
                   "values": {"busy_avg": 70.0, "busy_max": 90.0, "qlen_avg": 2.0}}],
        "next_cursor": None}]})

    entity: TierEntity
    tier: TierName = Field(description="the tier the rows come from (never auto)")
    requested_tier: TierName
    view: str = Field(description="the SQL view read", examples=["measure.cpu_hour"])
    auto_rule: str | None = Field(default=None, description="how auto chose the tier")
    items: list[TierRowRead]
    next_cursor: str | None = Field(description="pass as cursor for the next page; null at the end")


