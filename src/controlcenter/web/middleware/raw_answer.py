"""A JSON answer sent straight on ASGI, for middleware that refuses before the framework."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Send


def json_body(value: Any) -> bytes:
    """Compact JSON, as the framework's own JSON answers are written."""
    return json.dumps(value, separators=(",", ":")).encode()


async def send_json(send: Send, status: int, body: bytes, *, close: bool = False) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
