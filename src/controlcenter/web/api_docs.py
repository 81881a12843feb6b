"""/docs (Swagger UI) and /redoc (ReDoc), with their assets served by the service itself, so
that the interface description can be read offline (versions and licences: docs/vendor.md).

Both pages carry a Content-Security-Policy that lets them load only the service's own assets
and run only those scripts plus the one initialisation script FastAPI writes into the Swagger
UI page, named by its SHA-256 (CSP's hash source). Both libraries write their styles into the
page as they render, so styles may be inline; no style can run script or load from elsewhere.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypedDict

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

from controlcenter.web.static_files import HeaderedStaticFiles

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


_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
ASSET_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"}


def content_security_policy(html: str) -> str:
    """Only this service's assets, and the page's inline scripts by their hashes."""
    hashes = [
        "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"
        for script in _INLINE_SCRIPT.findall(html)
    ]
    return "; ".join(
        (
            "default-src 'self'",
            " ".join(["script-src 'self'", *hashes]),
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "font-src 'self' data:",
            "connect-src 'self'",
            "worker-src 'self' blob:",  # ReDoc's search runs in a worker it makes from a blob
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        )
    )


def _secured(page: HTMLResponse) -> Callable[[], Awaitable[HTMLResponse]]:
    """A route answering `page` with its headers. The page is the same on every request, so
    its bytes and its policy (a hash of its inline script) are made once, here."""
    body = bytes(page.body)
    headers = {
        **ASSET_HEADERS,
        "Content-Security-Policy": content_security_policy(body.decode()),
        "X-Frame-Options": "DENY",
    }

    async def serve() -> HTMLResponse:
        return HTMLResponse(body, headers=headers)

    return serve


def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        **_page("Swagger UI"),
        swagger_js_url=_asset("swagger-ui-bundle.js"),
        swagger_css_url=_asset("swagger-ui.css"),
        swagger_favicon_url=_asset("favicon-32x32.png"),
        # No call to the public validator: the page makes no request to another host.
        swagger_ui_parameters={"validatorUrl": None, "persistAuthorization": True},
    )


def redoc() -> HTMLResponse:
    return get_redoc_html(
        **_page("ReDoc"),
        redoc_js_url=_asset("redoc.standalone.js"),
        redoc_favicon_url=_asset("favicon-32x32.png"),
        with_google_fonts=False,
    )


def install(app: FastAPI) -> None:
    """The two pages and the assets they load (create the app with docs_url=None)."""
    app.add_api_route("/docs", _secured(swagger_ui()), include_in_schema=False)
    app.add_api_route("/redoc", _secured(redoc()), include_in_schema=False)
    # `nosniff`: a script is run only as what it is served as.
    assets = HeaderedStaticFiles(directory=ASSETS_DIR, headers=ASSET_HEADERS)
    app.mount(ASSETS_PATH, assets, name="docs-assets")
