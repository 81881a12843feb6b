"""Counts and times every HTTP request by its route template (never the raw path, whose ids
would make one series per conversation), method and status; an answer given before routing
(a refused cross-origin request, a body over the limit) under `unmatched`."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controlcenter.observability.metrics import http_series

UNMATCHED = "unmatched"


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
            series = http_series(_route(scope), scope["method"])
            series.record(status, time.perf_counter() - started)


def _route(scope: Scope) -> str:
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED
