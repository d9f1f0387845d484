from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.contract import json_range

RetentionClass = Literal["raw", "hour", "day", "month"]


class RetentionClassRead(BaseModel):
    retention_class: RetentionClass = Field(alias="class", description="raw: interval runs and copies; "
                                            "hour, day, month: the tiers of that grain and their rollups")
    keep_days: int | None = Field(description="how long it is kept (null: for ever)")
    cutoff: datetime | None = Field(description="data before this would go now")
    purged_before: datetime | None = Field(description="retention removed everything of this class before this")

    model_config = {"populate_by_name": True}


class RetentionRead(BaseModel):
    classes: list[RetentionClassRead]


class RetentionUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    keep_days: Annotated[int, *json_range(1, 36_600)] | None = Field(description="days to keep (null: for ever; raw "
                                  "data cannot be kept for ever)", examples=[35])


class PurgeRead(BaseModel):
    """One purge (or dry run): what it removed (or would remove) and what held it back."""

    purge_id: int
    dry_run: bool
    now: datetime | None = None
    removed: list[dict[str, Any]] = Field(description="per object: class, cutoff, object, rows "
                                          "(and intervals, counter_values for days of runs)")
    held_back: list[dict[str, Any]] = Field(description="per class held back: the first hour not yet "
                                            "condensed into every tier it feeds, and such hours")
    horizons: dict[str, datetime] | None = None


class PurgeLogRead(BaseModel):
    purge_id: int
    started_at: datetime
    finished_at: datetime | None
    dry_run: bool
    requested_by: str
    now_at: datetime
    removed: list[dict[str, Any]]
    held_back: list[dict[str, Any]]


class PurgeLogPage(BaseModel):
    items: list[PurgeLogRead]
