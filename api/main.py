"""The measuredb REST API: create_app() builds it; `measuredb api` serves it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse

from api.config import ApiSettings
from api.counters.router import router as counters_router
from api.db import build_engine
from api.errors import install_handlers
from api.health.router import router as health_router
from api.meascom.router import router as meascom_router
from api.measurements.router import router as measurements_router
from api.reports.router import router as reports_router
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

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.engine = build_engine(url, role=settings.db_role, pool_size=settings.pool_size)
        try:
            yield
        finally:
            app.state.engine.dispose()

    app = FastAPI(title="measuredb", version="0.1.0", description=DESCRIPTION, lifespan=lifespan)
    app.state.settings = settings
    install_handlers(app)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins,
                           allow_methods=["GET", "POST", "DELETE"], allow_headers=["Authorization"])

    @app.middleware("http")
    async def limit_body(request: Request, call_next):
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > settings.max_body_bytes):
            return JSONResponse(
                {"error": "PayloadTooLarge",
                 "detail": f"request body over {settings.max_body_bytes} bytes"},
                status_code=413,
            )
        return await call_next(request)

    app.include_router(health_router)
    app.include_router(measurements_router)
    app.include_router(counters_router)
    app.include_router(usercounters_router)
    app.include_router(tiers_router)
    app.include_router(meascom_router)
    app.include_router(reports_router)
    return app
