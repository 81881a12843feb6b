"""Refuse state-changing browser requests that come from another site.

The approach of Go's `http.CrossOriginProtection`: browsers label every request with
`Sec-Fetch-Site` (all current ones since 2023) and send `Origin` on every non-GET request, and a
page cannot forge either. So a request that is not GET, HEAD or OPTIONS is refused when
`Sec-Fetch-Site` says it came from another site (`cross-site` or `same-site`: a sibling
subdomain is another site to this service), or when `Origin` names another host than the one
the request was sent to. An origin listed in `ALLOWED_ORIGINS`
(a front end of the operator's on another host) is let through either way.

Requests with an `Authorization` header are not affected: a browser only sends one that a page
set itself, and a cross-origin page can do that only after a CORS preflight, which this service
never grants. Neither are requests without both headers: those do not come from a browser (or
come from a same-origin one too old to send them), and a form on another site cannot suppress
them.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from controlcenter.web.middleware.raw_answer import json_body, send_json

REFUSED_MESSAGE = "Cross-origin request refused"
REFUSED = json_body({"error": REFUSED_MESSAGE})
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_OTHER_SITE = frozenset({"cross-site", "same-site"})


def is_refused(method: str, headers: Headers, allowed: frozenset[str]) -> bool:
    """Whether the cross-origin rule above refuses a request with these headers."""
    if method in _SAFE_METHODS or "authorization" in headers:
        return False
    origin = headers.get("origin", "").strip().lower()
    if origin and origin in allowed:
        return False
    site = headers.get("sec-fetch-site", "").strip().lower()
    if site in _OTHER_SITE:
        return True
    if not origin:
        return False
    # Only the host is compared, as Go does: behind a proxy that ends TLS the service may not
    # know its own scheme, and a browser that could be fooled on the scheme alone still says
    # `cross-site` above.
    host = headers.get("host", "").strip().lower()
    return urlsplit(origin).netloc != host or not host


class CrossOriginProtection:
    """Pure ASGI middleware: a refused request is answered 403 before its body is read."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and is_refused(
            scope["method"], Headers(scope=scope), self.allowed
        ):
            await send_json(send, 403, REFUSED)
            return
        await self.app(scope, receive, send)
