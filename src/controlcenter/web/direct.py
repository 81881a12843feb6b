"""Routes answered in front of the framework: what the service's stack gives every answer, done
once, the same way.

`ControlCenterApp` (`web/entry.py`) hands a few hot requests (GET on the dashboard index, POST
on the onboarding record) straight to their handlers before FastAPI's own layers, the
service's middleware, routing and dependency solving: each pure-ASGI layer costs a call, a
closure around `send` and a dict lookup per message, routing tries the routes one by one and
FastAPI solves every dependency's cache key per request, and together they cost more than
such a request's own work (py-spy, `make bench`; BENCHMARKS.md). The FastAPI route stays
declared (it documents the route in /openapi.json and answers when tracing is on, since the
instrumented stack gives every request its span), and the tests hold both to the same
answers (`tests/web/test_direct.py`). What the stack gives every answer, `DirectRoute` gives
these:

- the request id (`web/middleware/request_id.py`): read or made, bound to every log record
  while the request is answered (uvicorn's access line included), echoed in `X-Request-ID`;
- the request metrics (`observability/metrics.py`): counted by route template, method and
  status, and timed; an answer given before routing (a refused cross-origin request, a body
  over the limit) under `unmatched`, as the middleware counts it;
- an unexpected error: logged with its traceback and answered 500 `{"error":"Internal server
  error"}`, as the app's `Exception` handler answers.

An answer goes out as two raw ASGI messages with the head built from bytes, no Starlette
`Request`, `Headers` or `Response` objects.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import cookie_parser
from starlette.types import Scope, Send
from structlog.contextvars import bind_contextvars, reset_contextvars

from controlcenter.common.logs import get_logger
from controlcenter.observability.metrics import http_series
from controlcenter.web.deps import SESSION_COOKIE
from controlcenter.web.errors import ApiError
from controlcenter.web.middleware.metrics import UNMATCHED
from controlcenter.web.middleware.raw_answer import json_body
from controlcenter.web.middleware.request_id import HEADER_NAME, request_id

log = get_logger(__name__)

JSON = b"application/json"
Headers = tuple[tuple[bytes, bytes], ...]


@dataclass(frozen=True, slots=True)
class Answer:
    """`headers` come before the content length and type, where Starlette puts the headers it
    is given, so either way of answering writes the same head. `routed`: False for an answer
    the stack gives before routing (its metrics count it as `unmatched`)."""

    status: int
    body: bytes
    content_type: bytes
    headers: Headers = ()
    routed: bool = True


FAILED = Answer(500, json_body({"error": "Internal server error"}), JSON)


def json_answer(status: int, content: Any) -> Answer:
    """`content` as Starlette's `JSONResponse` writes it (the framework's answers, the app's
    `ApiError` handler's)."""
    body = json.dumps(
        content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")
    return Answer(status, body, JSON)


def error_answer(error: ApiError) -> Answer:
    """What the app's `ApiError` handler answers."""
    return json_answer(error.status, error.body())


def session_cookie(header: str | None) -> str | None:
    """The `session` cookie as `Request.cookies` reads it; most calls carry no cookie at all."""
    if not header or SESSION_COOKIE not in header:
        return None
    return cookie_parser(header).get(SESSION_COOKIE)


def bearer_token(authorization: str | None) -> str | None:
    """The credentials of `Authorization: Bearer`, as FastAPI's `HTTPBearer` reads them (the
    routes' `web.deps.BEARER`) and `optional_principal` strips them; None without one."""
    if not authorization:
        return None
    scheme, _, credentials = authorization.partition(" ")
    credentials = credentials.strip()
    if not scheme or not credentials or scheme.lower() != "bearer":
        return None
    return credentials


class DirectRoute:
    """The frame of one route answered in front of the framework (the module's docstring)."""

    def __init__(self, template: str, method: str) -> None:
        self._method = method
        self._routed = http_series(template, method)
        self._unmatched = http_series(UNMATCHED, method)

    async def run(
        self, scope: Scope, send: Send, answer: Callable[[], Awaitable[Answer | None]]
    ) -> None:
        """Sends what `answer()` answers (None: the client left before it, nothing is sent).
        An error of the answer's own is a 500, logged; only the server's `send` can raise from
        here."""
        started = time.perf_counter()
        rid = request_id(scope["headers"])
        tokens = bind_contextvars(request_id=rid)
        status, routed = 500, False
        try:
            try:
                found = await answer()
            except Exception:
                log.exception("unhandled error", path=scope["path"], method=self._method)
                found = FAILED
            if found is None:
                return
            status, routed = found.status, found.routed
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [
                        *found.headers,
                        (b"content-length", str(len(found.body)).encode()),
                        (b"content-type", found.content_type),
                        (HEADER_NAME, rid.encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": found.body})
        finally:
            reset_contextvars(**tokens)
            series = self._routed if routed else self._unmatched
            series.record(status, time.perf_counter() - started)
