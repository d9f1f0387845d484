"""Typed settings of the REST API (prefix MEASUREDB_API_, plus DATABASE_URL)."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from core.settings import DatabaseSettings, ListSetting


class ApiSettings(DatabaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MEASUREDB_API_", env_file=".env", extra="ignore", populate_by_name=True
    )

    host: str = Field(default="127.0.0.1", min_length=1, description="address to listen on")
    port: int = Field(default=8000, ge=1, le=65535)
    db_role: str = Field(
        default="measure_api",
        pattern=r"^([a-z_][a-z0-9_]{0,62})?$",
        description="role every API session runs as (SET ROLE); empty the login role's own",
    )
    pool_size: int | None = Field(
        default=None, ge=1, le=200,
        description="database connections per worker (as many again when busy); empty: from the "
                    "database's max_connections shared by the workers, at most 10 (api/sizing.py)")
    pool_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300,
        description="how long a request waits for a database connection when every one is in use (then 503)")
    workers: int | None = Field(default=None, ge=1, le=64,
                                description="uvicorn worker processes; empty: one per CPU core, at most 4")
    threads: int | None = Field(
        default=None, ge=1, le=1000,
        description="threads per worker running the endpoints; empty: one per database connection the "
                    "worker may open (twice pool_size)")
    keep_alive_seconds: int = Field(
        default=120, ge=1, le=3600,
        description="an idle keep-alive connection is closed after this long: longer than the clients' "
                    "own (httpx 5 s, aiohttp 15 s, Go 90 s), so a client never sends on a connection "
                    "the API is closing")
    require_token_for_reads: bool = Field(default=False)
    cors_origins: ListSetting = Field(
        default_factory=list,
        description="origins allowed to call the API from a browser: http(s)://host[:port], comma-separated "
                    "(or a JSON list); empty: closed (the default)")
    max_body_bytes: int = Field(default=1_048_576, ge=1024, le=64 * 1024 * 1024,
                                description="largest request body (POST /import: max_import_bytes)")
    anonymous_max_body_bytes: int = Field(
        default=16_384, ge=0, le=64 * 1024 * 1024,
        description="largest request body without a bearer token (every endpoint with a body needs "
                    "a token; this bounds what an anonymous caller makes a worker hold)")
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
    auth_failure_rate_per_second: float = Field(
        default=1.0, gt=0, le=1_000_000,
        description="failed authentications (401) per second per client address, after the burst; past "
                    "it, requests with a token from that address get 429 (api/ratelimit.py)")
    auth_failure_burst: int = Field(default=20, ge=1, le=1_000_000,
                                    description="failed authentications a client address may make at once")
    anonymous_limit_exempt: ListSetting = Field(
        default_factory=lambda: ["127.0.0.1/8", "::1"],
        description="client addresses or networks the anonymous rate limit does not apply to")

    @field_validator("workers", "pool_size", "threads", mode="before")
    @classmethod
    def _empty_is_automatic(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("anonymous_limit_exempt")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is no address or network (write 10.0.0.0/8, 192.0.2.7 or ::1, "
                                 "comma-separated)") from None
        return value

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        for origin in value:
            if origin != "*" and not re.fullmatch(r"https?://[^/\s:]+(:\d{1,5})?", origin):
                raise ValueError(f"{origin!r} is no origin (write http(s)://host[:port], comma-separated, "
                                 "or * for any)")
        return value
