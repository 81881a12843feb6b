"""Counts, times and logs every HTTP request: its route template (never the raw path in the
metrics, whose ids would make one series per conversation), method and status, an answer given
before routing (a refused cross-origin request, a body over the limit) under `unmatched`.

The log line is the request's only one (`controlcenter serve` turns uvicorn's access log off):
`request` with client, method, path (with its query), http version, route, status and
`duration_ms`, written when the answer ends (a chat's stream included), inside the request's
context, so it carries the `request_id` too (docs/logging.md). It goes through the standard
library's logger rather than a structlog one: at a level that leaves INFO out it costs one
cached level check, where structlog's lazy proxy would bind a new logger on every request.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controlcenter.common.logs import REQUEST_FIELDS
from controlcenter.observability.metrics import http_series

UNMATCHED = "unmatched"
REQUEST_LOGGER = "controlcenter.request"
REQUEST_EVENT = "request"

_log = logging.getLogger(REQUEST_LOGGER)


class RequestMetrics:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server answers when the app raises before its answer

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            seconds = time.perf_counter() - started
            route = _route(scope)
            http_series(route, scope["method"]).record(status, seconds)
            if _log.isEnabledFor(logging.INFO):
                _log.info(REQUEST_EVENT, extra=_fields(scope, route, status, seconds))


def _route(scope: Scope) -> str:
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED


def _fields(scope: Scope, route: str, status: int, seconds: float) -> dict[str, object]:
    """The line's fields (`REQUEST_FIELDS`, in that order)."""
    client = scope.get("client")
    query = scope.get("query_string", b"")
    path = scope["path"] + ("?" + query.decode("latin-1") if query else "")
    values = (
        f"{client[0]}:{client[1]}" if client else None,
        scope["method"],
        path,
        scope.get("http_version"),
        route,
        status,
        round(seconds * 1000, 2),
    )
    return dict(zip(REQUEST_FIELDS, values, strict=True))
