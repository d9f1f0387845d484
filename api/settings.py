"""Typed settings of the REST API (prefix MEASUREDB_API_, plus DATABASE_URL)."""

from __future__ import annotations

import ipaddress

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from core.settings import DatabaseSettings


class ApiSettings(DatabaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MEASUREDB_API_", env_file=".env", extra="ignore", populate_by_name=True
    )

    host: str = Field(default="127.0.0.1", description="address to listen on")
    port: int = Field(default=8000, ge=1, le=65535)
    db_role: str = Field(
        default="measure_api",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="role every API session runs as (SET ROLE); empty the login role's own",
    )
    pool_size: int = Field(default=10, ge=1, le=200)
    workers: int = Field(default=1, ge=1, le=64, description="uvicorn worker processes")
    require_token_for_reads: bool = Field(default=False)
    cors_origins: list[str] = Field(default_factory=list, description="closed by default")
    max_body_bytes: int = Field(default=1_048_576, ge=1024, le=64 * 1024 * 1024,
                                description="largest request body (POST /import: max_import_bytes)")
    max_import_bytes: int = Field(default=4 * 1024**3, ge=1024, le=1024**4,
                                  description="largest CSV upload to POST /import (it is streamed)")
    heartbeat_stale_seconds: float = Field(default=60.0, gt=0)
    cache_enabled: bool = Field(
        default=True, description="keep answers of GET reads until stored data changes (api/cache.py)")
    cache_max_bytes: int = Field(default=64 * 1024 * 1024, ge=0, le=16 * 1024**3,
                                 description="read cache size per worker process")
    cache_max_entry_bytes: int = Field(default=4 * 1024 * 1024, ge=0, le=1024**3,
                                       description="larger answers are not cached")
    token_cache_seconds: float = Field(
        default=60.0, ge=0, le=3600,
        description="how long a worker remembers a read token's scope (revocation is seen at once)")
    control_timeout_seconds: float = Field(
        default=5.0, gt=0, le=120,
        description="how long a request to the collector (status, active reads, bumps) waits")
    anonymous_rate_per_second: float = Field(
        default=10.0, ge=0, le=1_000_000,
        description="requests per second per client address without a bearer token, after the "
                    "burst (api/ratelimit.py); 0: no limit")
    anonymous_burst: int = Field(default=100, ge=1, le=1_000_000,
                                 description="requests a client address without a bearer token may "
                                             "make at once")
    anonymous_limit_exempt: list[str] = Field(
        default_factory=lambda: ["127.0.0.1/8", "::1"],
        description="client addresses or networks the anonymous rate limit does not apply to")

    @field_validator("anonymous_limit_exempt")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            ipaddress.ip_network(entry, strict=False)  # ValueError: not an address or network
        return value
