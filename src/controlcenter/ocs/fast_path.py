"""GET on the dashboard index, answered in front of the whole framework.

`ControlCenterApp` (`web/entry.py`) hands such a request straight to `IndexFastPath` before
FastAPI's own layers (its telemetry check, the error and body-limit middleware), the
service's middleware and routing: each pure-ASGI layer costs a call, a closure around `send`
and a dict lookup per message, and together they cost more than the request's own work
(py-spy, `make bench`). What those layers give the index, it
does here, the same way:

- the request id (`web/middleware/request_id.py`): read or made, bound to every log record
  while the request is answered (uvicorn's access line included), echoed in `X-Request-ID`;
- the request metrics (`observability/metrics.py`): counted by route template, method and
  status, and timed, through children bound once;
- an unexpected error: logged with its traceback and answered 500 `{"error":"Internal server
  error"}`, as the app's `Exception` handler answers.

The answer goes out as two raw ASGI messages with the head built from bytes, no Starlette
`Request`, `Headers` or `Response` objects; the request's headers are read in one pass.
"""

from __future__ import annotations

import time
from typing import Protocol

from starlette.datastructures import QueryParams
from starlette.types import Scope, Send
from structlog.contextvars import bind_contextvars, reset_contextvars

from controlcenter.common.logs import get_logger
from controlcenter.config import Config
from controlcenter.db import Database
from controlcenter.observability.metrics import http_series
from controlcenter.ocs.index import PATH, PATH_PATTERN, Answer, answer_index
from controlcenter.web.middleware.raw_answer import json_body
from controlcenter.web.middleware.request_id import HEADER_NAME, accepted, new_request_id

log = get_logger(__name__)

_PREFIX = PATH.split("{", 1)[0]  # a cheap test before the regex: most paths are not the index
_WANTED = frozenset(
    (b"authorization", b"cookie", b"accept", b"ocs-apirequest", HEADER_NAME),
)
_FAILED = Answer(500, json_body({"error": "Internal server error"}), b"application/json")


class IndexParts(Protocol):
    """What the index uses of the app (the app's services provide it)."""

    db: Database
    config: Config


class PartsHolder(Protocol):
    """Where the parts are found once the app has started (the app's `state`)."""

    services: IndexParts


class IndexFastPath:
    def __init__(self, state: PartsHolder) -> None:
        self._state = state
        self._metrics = http_series(PATH, "GET")

    @staticmethod
    def app_id(path: str) -> str | None:
        """The app id when `path` is the index's, else None."""
        if not path.startswith(_PREFIX):
            return None
        match = PATH_PATTERN.match(path)
        return match["app_id"] if match is not None else None

    async def answer(self, scope: Scope, send: Send, app_id: str) -> None:
        """Answer a GET on the index for `app_id`. An error of the answer's own is a 500,
        logged; only the server's `send` can raise from here."""
        started = time.perf_counter()
        found: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            if name in _WANTED and name not in found:  # the first of each, as Headers.get
                found[name] = value
        request_id = accepted(found.get(HEADER_NAME)) or new_request_id()
        tokens = bind_contextvars(request_id=request_id)
        status = 500
        try:
            try:
                answer = await self._answer(scope, app_id, found)
            except Exception:
                log.exception("unhandled error", path=scope["path"], method="GET")
                answer = _FAILED
            status = answer.status
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [
                        *answer.headers,
                        (b"content-length", str(len(answer.body)).encode()),
                        (b"content-type", answer.content_type),
                        (HEADER_NAME, request_id.encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": answer.body})
        finally:
            reset_contextvars(**tokens)
            self._metrics.record(status, time.perf_counter() - started)

    async def _answer(self, scope: Scope, app_id: str, found: dict[bytes, bytes]) -> Answer:
        parts = self._state.services
        query = scope["query_string"]
        client = scope.get("client")
        return await answer_index(
            parts.db,
            parts.config,
            app_id,
            authorization=_text(found.get(b"authorization")),
            cookie=_text(found.get(b"cookie")),
            accept=_text(found.get(b"accept")),
            ocs_apirequest=_text(found.get(b"ocs-apirequest")),
            query_format=QueryParams(query).get("format") if query else None,
            client=client[0] if client else None,
        )


def _text(value: bytes | None) -> str | None:
    # Header values are latin-1 on the wire, as Starlette's `Headers` decodes them.
    return value.decode("latin-1") if value is not None else None
