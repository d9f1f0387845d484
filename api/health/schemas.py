from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class CacheStatsRead(BaseModel):
    """The read cache of the worker process that answered (api/cache.py)."""

    enabled: bool
    listening: bool = Field(description="its LISTEN connection is up (else reads bypass the cache)")
    entries: int
    bytes: int
    max_bytes: int
    hits: int
    misses: int
    shared: int = Field(description="requests that waited for the same answer being computed")
    stores: int
    invalidations: int = Field(description="times the cache was emptied (stored data changed, or its LISTEN connection was (re)opened)")
    evictions: int = Field(description="answers dropped to stay within max_bytes")


class HealthRead(BaseModel):
    status: str = Field(description="ok; starting (the collector is registering, building its node or "
                                    "backfilling: detail says how far); degraded (the collector is silent, or "
                                    "stopped); "
                                    "down (no database)", examples=["ok"])
    database: bool = Field(description="the database answered")
    schema_version: int | None = Field(description="schema version recorded in the database")
    code_schema_version: int = Field(description="schema version of this measuredb")
    timescaledb: bool | None = Field(description="the database uses TimescaleDB")
    last_heartbeat_at: datetime | None = Field(description="last collector heartbeat")
    collector_alive: bool = Field(description="a heartbeat within heartbeat_stale_seconds (or a collector "
                                              "still starting)")
    collector_mode: str | None = Field(default=None, description="the latest heartbeat's mode: starting, "
                                                                 "backfill, live, or stopped (its last "
                                                                 "beat, when it ended)")
    detail: str | None = Field(default=None, description="why the status is not ok; when ok, what the "
                                                     "collector's figures miss, if anything (e.g. a host "
                                                     "node whose CPU queue misses ended threads, and how much)")
    cache: CacheStatsRead | None = Field(default=None, description="null when the cache is off")
