"""A request id for every HTTP request: taken from `X-Request-ID` when the caller (or a proxy)
sent a sensible one, else made here; echoed in the answer and bound to every log record the
request causes, including the work it starts in the background. The id is also kept in the
request's state (`request.state.request_id`) for the answer to an unexpected error, which
Starlette sends from outside every middleware.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from structlog.contextvars import bind_contextvars, reset_contextvars

HEADER = "X-Request-ID"
HEADER_NAME = b"x-request-id"  # as the server hands header names over (lower case)
STATE_KEY = "request_id"
_ACCEPTED = re.compile(rb"^[A-Za-z0-9._:-]{1,128}$")


def accepted(value: bytes | None) -> str | None:
    """A caller's id when it is one we echo (short, no spaces or markup), else None."""
    if value is not None and _ACCEPTED.match(value):
        return bytes(value).decode("ascii")
    return None


def new_request_id() -> str:
    """32 random hex digits, the length of a uuid4's hex form. Not a uuid4: building the
    `UUID` object costs more than the random bytes themselves on every request, and nothing
    reads its version digit."""
    return os.urandom(16).hex()


def request_id(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The first acceptable `X-Request-ID` the request carries, or a new id."""
    for name, value in headers:
        if name == HEADER_NAME:
            found = accepted(value)
            if found is not None:
                return found
    return new_request_id()


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        value = request_id(scope.get("headers", ()))
        scope.setdefault("state", {})[STATE_KEY] = value

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[HEADER] = value
            await send(message)

        # bind/reset rather than structlog's `bound_contextvars`, which copies the whole
        # context to save what it overrides: the token restores the previous value the same.
        tokens = bind_contextvars(request_id=value)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            reset_contextvars(**tokens)
