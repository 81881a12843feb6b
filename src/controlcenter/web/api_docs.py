"""/docs (Swagger UI) and /redoc (ReDoc), with their assets served by the service itself, so
that the interface description can be read offline (versions and licences: docs/vendor.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS_PATH = "/docs-assets"
ASSETS_DIR = Path(__file__).parent / "docs_assets"
TITLE = "Control Center"


def _asset(name: str) -> str:
    return f"{ASSETS_PATH}/{name}"


class _Page(TypedDict):
    """What both pages are told alike: the document they show and their title."""

    openapi_url: str
    title: str


def _page(name: str) -> _Page:
    return {"openapi_url": "/openapi.json", "title": f"{TITLE} - {name}"}


async def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        **_page("Swagger UI"),
        swagger_js_url=_asset("swagger-ui-bundle.js"),
        swagger_css_url=_asset("swagger-ui.css"),
        swagger_favicon_url=_asset("favicon-32x32.png"),
        # No call to the public validator: the page makes no request to another host.
        swagger_ui_parameters={"validatorUrl": None, "persistAuthorization": True},
    )


async def redoc() -> HTMLResponse:
    return get_redoc_html(
        **_page("ReDoc"),
        redoc_js_url=_asset("redoc.standalone.js"),
        redoc_favicon_url=_asset("favicon-32x32.png"),
        with_google_fonts=False,
    )


def install(app: FastAPI) -> None:
    """The two pages and the assets they load (create the app with docs_url=None)."""
    app.add_api_route("/docs", swagger_ui, include_in_schema=False)
    app.add_api_route("/redoc", redoc, include_in_schema=False)
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
