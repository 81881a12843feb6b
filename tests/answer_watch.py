"""A watch on what a server answers: every error body and every `error` event, looked at for
a database driver's or SQL's words (tests/plugins/answers.py fails a test that sent one).

The application is wrapped as plain ASGI, so every client is covered (httpx, the browser,
node) without touching any of them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# What a driver or the database puts in its errors (SQLite's, asyncpg's, psycopg's, SQLAlchemy's).
DRIVER_TEXT = re.compile(
    r"FOREIGN KEY|UNIQUE|NOT NULL constraint|\bSQL\b|\bsqlalche|IntegrityError|OperationalError"
    r"|ProgrammingError|DBAPIError|sqlite3|asyncpg|psycopg|violates|constraint failed"
    r"|\bconstraint \"|\bINSERT INTO\b|\bUPDATE \w+ SET\b|\bSELECT .* FROM\b"
)


@dataclass
class AnswerWatch:
    """Wraps an ASGI application; `found` holds each answer that carried driver text."""

    app: ASGIApp | None = None
    found: list[str] = field(default_factory=list)

    def wrap(self, app: ASGIApp) -> ASGIApp:
        self.app = app
        return self

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answer = _Answer(scope.get("path", ""))

        async def watched(message: Message) -> None:
            answer.seen(message)
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            self.found.extend(answer.problems())


class _Answer:
    def __init__(self, path: str) -> None:
        self.path = path
        self.status = 0
        self.stream = False
        self.body = bytearray()

    def seen(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            headers = dict(message.get("headers", []))
            self.stream = headers.get(b"content-type", b"").startswith(b"text/event-stream")
        elif message["type"] == "http.response.body" and (self.stream or self.status >= 400):
            self.body += message.get("body", b"")

    def problems(self) -> list[str]:
        text = self.body.decode("utf-8", "replace")
        shown = _error_events(text) if self.stream else [text]
        return [f"{self.path} {self.status}: {t}" for t in shown if DRIVER_TEXT.search(t)]


def _error_events(text: str) -> list[str]:
    """The `error` events of an event stream (the chat's and the UI message stream's)."""
    errors = []
    for line in text.splitlines():
        if not line.startswith("data: "):
            continue
        try:
            event: Any = json.loads(line[len("data: ") :])
        except ValueError:
            continue  # `[DONE]`
        if isinstance(event, dict) and event.get("type") == "error":
            errors.append(line)
    return errors
