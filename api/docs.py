"""/docs (Swagger UI) and /redoc (ReDoc) from files of an installed package, not a CDN: they
work on a machine without internet. The JavaScript, CSS and favicon come from the
``fastapi-offline`` wheel (pinned in requirements.lock), served under :data:`ASSETS`."""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.responses import HTMLResponse

ASSETS = "/docs-assets"


def install_docs(app: FastAPI) -> None:
    """Call with a FastAPI made with docs_url=None and redoc_url=None."""
    app.mount(ASSETS, StaticFiles(directory=str(files("fastapi_offline") / "static")), name="docs-assets")
    redirect = "/docs/oauth2-redirect"

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/favicon.png", oauth2_redirect_url=f"{root}{redirect}")

    async def swagger_ui_redirect(_request: Request) -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS}/favicon.png", with_google_fonts=False)

    app.add_route("/docs", swagger_ui, include_in_schema=False)
    app.add_route(redirect, swagger_ui_redirect, include_in_schema=False)
    app.add_route("/redoc", redoc, include_in_schema=False)
