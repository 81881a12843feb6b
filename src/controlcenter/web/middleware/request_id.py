"""A request id for every HTTP request: taken from `X-Request-ID` when the caller (or a proxy)
sent a sensible one, else made here; echoed in the answer and bound to every log record the
request causes, including the work it starts in the background."""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from structlog.contextvars import bound_contextvars

HEADER = "X-Request-ID"
_ACCEPTED = re.compile(rb"^[A-Za-z0-9._:-]{1,128}$")


def _incoming(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id" and _ACCEPTED.match(value):
            return bytes(value).decode("ascii")
    return None


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _incoming(scope) or uuid.uuid4().hex

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[HEADER] = request_id
            await send(message)

        with bound_contextvars(request_id=request_id):
            await self.app(scope, receive, send_with_id)
