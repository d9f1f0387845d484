"""The measuredb REST API: create_app() builds it; `measuredb api` serves it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware

from api.cache import CacheMiddleware, ReadCache
from api.configuration.router import router as configuration_router
from api.contract import install_openapi, reject_nul
from api.counters.router import router as counters_router
from api.db import build_engine
from api.docs import install_docs
from api.errors import install_handlers
from api.health.router import router as health_router
from api.io.router import router as io_router
from api.limits import BodyLimitMiddleware
from api.meascom.router import router as meascom_router
from api.measurements.router import router as measurements_router
from api.ratelimit import AnonymousRateLimit
from api.reports.router import router as reports_router
from api.retention.router import router as admin_router
from api.settings import ApiSettings
from api.sizing import cpu_count, database_budget, plan
from api.tiers.router import router as tiers_router
from api.usercounters.router import router as usercounters_router

DESCRIPTION = """\
MEASURE's callable procedures over HTTP: measurements, counter reads (MEASREAD,
MEASREADACTIVE), user-defined counters, MEASCOM, tiers and ENFORM-style reports.
"""


def create_app(settings: ApiSettings | None = None, *, database_url: str | None = None) -> FastAPI:
    settings = settings or ApiSettings()
    url = database_url or settings.database_url
    if url is None:
        raise RuntimeError("create_app needs a database URL (DATABASE_URL or database_url=)")
    settings = sized(settings, url)
    threads, pool_size = settings.threads, settings.pool_size
    assert threads is not None and pool_size is not None  # sized() fills them in
    cache = ReadCache(max_bytes=settings.cache_max_bytes, max_entry_bytes=settings.cache_max_entry_bytes,
                      token_ttl=settings.token_cache_seconds,
                      require_token_for_reads=settings.require_token_for_reads) if settings.cache_enabled else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # the threads that run the endpoints (anyio's default: 40, whatever the pool)
        anyio.to_thread.current_default_thread_limiter().total_tokens = threads
        app.state.engine = build_engine(url, role=settings.db_role, pool_size=pool_size,
                                        pool_timeout=settings.pool_timeout_seconds)
        if cache is not None:
            await cache.start(url)
        try:
            yield
        finally:
            if cache is not None:
                await cache.close()
            app.state.engine.dispose()

    app = FastAPI(title="measuredb", version="0.1.0", description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None, dependencies=[Depends(reject_nul)])
    app.state.settings = settings
    app.state.read_cache = cache
    install_handlers(app)
    install_openapi(app, settings)
    install_docs(app)
    # ASGI middleware, innermost first: the read cache right before the routes, the body
    # limit around it, the anonymous rate limit around that (cached answers count too), CORS
    # outermost (its headers depend on the request's Origin).
    if cache is not None:
        app.add_middleware(CacheMiddleware, cache=cache)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes,
                       anonymous_max_bytes=settings.anonymous_max_body_bytes,
                       streamed={("POST", "/import"): settings.max_import_bytes})
    app.add_middleware(AnonymousRateLimit, rate=settings.anonymous_rate_per_second,
                       burst=settings.anonymous_burst, exempt=settings.anonymous_limit_exempt,
                       failure_rate=settings.auth_failure_rate_per_second,
                       failure_burst=settings.auth_failure_burst)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins,
                           allow_methods=["GET", "POST", "PUT", "DELETE"], allow_headers=["Authorization"])

    app.include_router(health_router)
    app.include_router(measurements_router)
    app.include_router(counters_router)
    app.include_router(usercounters_router)
    app.include_router(tiers_router)
    app.include_router(meascom_router)
    app.include_router(reports_router)
    app.include_router(admin_router)
    app.include_router(configuration_router)
    app.include_router(io_router)
    return app


def sized(settings: ApiSettings, url: str) -> ApiSettings:
    """`settings` with workers, pool_size and threads filled in (api/sizing.py): the
    database's connection budget is asked only when one of them is not given."""
    if None not in (settings.workers, settings.pool_size, settings.threads):
        return settings
    sizing = plan(cpus=cpu_count(), budget=database_budget(url), workers=settings.workers,
                  pool_size=settings.pool_size, threads=settings.threads)
    return settings.model_copy(update={"workers": sizing.workers, "pool_size": sizing.pool_size,
                                       "threads": sizing.threads})
