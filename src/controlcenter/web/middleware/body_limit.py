"""Reject request bodies over the limit with 413 before any router sees them."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controlcenter.web.middleware.raw_answer import json_body, send_json

TOO_LARGE = json_body({"error": "Request body too large"})
# How much of an oversized body is read and thrown away before answering. Closing a connection
# with unread data makes the kernel reset it, and the client then sees a broken connection
# instead of the 413; a body bigger than this is not worth reading, so its sender may.
_DISCARD_AT_MOST = 8 * 1024 * 1024


class BodyLimitMiddleware:
    """Buffers the body (every body this service accepts is small JSON) up to `limit` bytes."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            body = await read_body(scope, receive, self.limit)
        except BodyTooLarge:
            await send_json(send, 413, TOO_LARGE, close=True)
            return
        except ClientGone:
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # later calls wait for the client's disconnect

        await self.app(scope, replay, send)


class BodyTooLarge(Exception):
    """The body is over the limit (what was worth reading of it has been read and dropped)."""


class ClientGone(Exception):
    """The client disconnected before its body's end."""


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The request's whole body, at most `limit` bytes (BodyTooLarge, answered 413)."""
    declared = _content_length(scope)
    if declared is not None and declared > limit:
        if declared <= _DISCARD_AT_MOST and not _expects_continue(scope):
            await _discard(receive, _DISCARD_AT_MOST)
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            if message.get("more_body", False):
                await _discard(receive, _DISCARD_AT_MOST - size)
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _expects_continue(scope: Scope) -> bool:
    # Such a client waits for "100 Continue" (sent when the body is first read): answering
    # without reading means it never sends the body at all.
    return any(
        name == b"expect" and value.lower() == b"100-continue"
        for name, value in scope.get("headers", [])
    )


async def _discard(receive: Receive, budget: int) -> None:
    while budget > 0:
        message = await receive()
        if message["type"] == "http.disconnect" or not message.get("more_body", False):
            return
        budget -= len(message.get("body", b""))
