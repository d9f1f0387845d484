"""Scheduled-report shapes: definitions and runs out (style P8); nothing comes in but filters."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

RunStatus = Literal["running", "failed", "succeeded"]
Format = Literal["text", "csv", "json"]


class ReportDefinitionRead(BaseModel):
    """A scheduled report (the successor of a 1986 OBEY file)."""

    definition_id: int
    name: str
    report: str = Field(description="queries/<report>.sql")
    system_name: str | None = Field(description="null: every system")
    parameters: dict[str, Any] = Field(description="report parameters; dates may be relative "
                                       "(yesterday, last week, last month …), resolved per slot")
    schedule: str = Field(description="5-field cron expression in the system's local time",
                          examples=["5 6 * * *"])
    outputs: list[Format] = Field(description="renderings stored with each run (the rows as JSON always)")
    enabled: bool
    description: str
    created_at: datetime
    updated_at: datetime


class ReportDefinitionList(BaseModel):
    items: list[ReportDefinitionRead]


class ReportRunRead(BaseModel):
    """One run of a definition for one system and schedule slot."""

    run_id: int
    definition_id: int
    definition: str
    report: str
    system_name: str
    slot_at: datetime = Field(description="the scheduled instant this run is for")
    local_slot: datetime = Field(description="slot_at in the system's local time, with its offset")
    parameters: dict[str, Any] | None = Field(description="the parameters as resolved for this slot")
    instance: str = Field(description="the scheduler that ran it")
    claimed_at: datetime
    started_at: datetime
    finished_at: datetime | None
    status: RunStatus
    rows: int | None
    error: str | None
    attempt: int = Field(description="how many times this slot was tried")
    retry_after: datetime | None = Field(description="a failed run is tried again at this slot")
    formats: list[Format] = Field(description="the outputs stored with the run")


class ReportRunPage(BaseModel):
    items: list[ReportRunRead]
    next_cursor: str | None = Field(description="pass as cursor for the next page; null at the end")


class ReportRunDetail(ReportRunRead):
    format: Format
    output: str | None = Field(description="the run's output in `format` (null unless succeeded)")
