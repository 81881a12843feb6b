"""Counts and times every HTTP request by its route template (never the raw path, whose ids
would make one series per conversation), method and status."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controlcenter.observability.metrics import HTTP_DURATION, HTTP_REQUESTS

UNMATCHED = "unmatched"


class RequestMetrics:
    """`unrouted`: templates of paths answered before routing (the index's fast path), so
    they are labelled by template too."""

    def __init__(self, app: ASGIApp, unrouted: Sequence[str] = ()) -> None:
        self.app = app
        self._unrouted: list[tuple[re.Pattern[str], str]] = [
            (compile_path(template)[0], template) for template in unrouted
        ]

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
            route = self._route(scope)
            method = scope["method"]
            HTTP_REQUESTS.labels(route, method, str(status)).inc()
            HTTP_DURATION.labels(route, method).observe(time.perf_counter() - started)

    def _route(self, scope: Scope) -> str:
        route = scope.get("route")
        path = getattr(route, "path", None)
        if isinstance(path, str):
            return path
        for pattern, template in self._unrouted:
            if pattern.match(scope["path"]):
                return template
        return UNMATCHED
