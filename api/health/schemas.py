from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class HealthRead(BaseModel):
    status: str = Field(description="ok, degraded (collector silent) or down (no database)",
                        examples=["ok"])
    database: bool = Field(description="the database answered")
    schema_version: int | None = Field(description="schema version recorded in the database")
    code_schema_version: int = Field(description="schema version of this measuredb")
    timescaledb: bool | None = Field(description="the database uses TimescaleDB")
    last_heartbeat_at: datetime | None = Field(description="last collector heartbeat")
    collector_alive: bool = Field(description="a heartbeat within heartbeat_stale_seconds")
    detail: str | None = None
