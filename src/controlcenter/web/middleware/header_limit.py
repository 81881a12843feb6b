"""Refuse a request whose head (request line and headers) is over 16 KiB in all with 431.

The head is measured as it was written on the wire: the request line, each header as
`name: value` and its line end, and the blank line that ends the head.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from controlcenter.web.middleware.raw_answer import json_body, send_json

HEADER_LIMIT = 16 * 1024
TOO_LARGE = json_body({"error": "Request header fields too large"})
_LINE_END = len(b"\r\n")
_HEADER_EXTRA = len(b": ") + _LINE_END


class HeaderLimitMiddleware:
    def __init__(self, app: ASGIApp, limit: int = HEADER_LIMIT) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and head_size(scope) > self.limit:
            await send_json(send, 431, TOO_LARGE, close=True)
            return
        await self.app(scope, receive, send)


def head_size(scope: Scope) -> int:
    """The bytes of the request's head: `METHOD target HTTP/version`, the headers, the end."""
    query = scope.get("query_string", b"")
    target = len(scope.get("raw_path") or scope["path"].encode()) + (len(query) + 1 if query else 0)
    line = len(scope["method"]) + 1 + target + len(" HTTP/") + len(scope["http_version"])
    headers = sum(len(name) + len(value) + _HEADER_EXTRA for name, value in scope["headers"])
    return line + _LINE_END + headers + _LINE_END
