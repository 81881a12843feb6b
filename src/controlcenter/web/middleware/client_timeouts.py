"""Close the connections of clients too slow to be real: a request head not complete within
`CLIENT_HEAD_TIMEOUT_S` (30 s) of its first byte (or of the connection, for a client that sends
nothing), or a body that stalls, less than `MIN_BODY_PROGRESS` arriving in
`CLIENT_BODY_TIMEOUT_S` (30 s). Idle keep-alive connections between requests are uvicorn's own
`timeout_keep_alive` (`cli/proxies.py`).

uvicorn has no such timeouts: its keep-alive timer runs only between a response and the next
request's first byte, and every byte received cancels it, so a client that never finishes its
head, or trickles its body, holds a connection and its memory for as long as it likes. An ASGI
middleware cannot help, since the application sees a request only once its head is complete.
So the protocol class `serve` hands uvicorn (`--http` takes a class, a documented option) adds
them, on top of the 16 KiB head limit (`header_limit.py`). The timers are the event loop's, one
per connection while a head or a body is arriving, none while a response is written (a chat's
answer streams for as long as it runs).

A stalled body is not closed while uvicorn itself stopped reading it (the application has not
read what arrived): the slow one is then the application, not the client.
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import Any

from controlcenter.config import Config
from controlcenter.web.middleware.header_limit import HeaderLimitProtocol

SERVE_PROTOCOL = "controlcenter.web.middleware.client_timeouts:ClientTimeoutProtocol"
MIN_BODY_PROGRESS = 1024  # bytes a body must deliver in each `CLIENT_BODY_TIMEOUT_S`


@cache
def configured_timeouts() -> tuple[float, float]:
    """(head, body) timeouts of this process, from its environment."""
    config = Config()
    return config.client_head_timeout_s, config.client_body_timeout_s


class ClientTimeoutProtocol(HeaderLimitProtocol):
    def timeouts(self) -> tuple[float, float]:
        """(head, body) timeouts in seconds."""
        return configured_timeouts()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timeout_s, self._body_timeout_s = self.timeouts()
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_bytes = 0  # arrived since the body timer was armed

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head()
        self._cancel_body()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head and self._head_timer is None:
            self._arm_head()  # the first byte of the next request's head
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._cancel_head()
        self._body_bytes = 0
        self._body_timer = self.loop.call_later(self._body_timeout_s, self._body_stalled)
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._cancel_body()
        super().on_message_complete()

    def _arm_head(self) -> None:
        self._cancel_head()
        self._head_timer = self.loop.call_later(self._head_timeout_s, self._head_too_slow)

    def _cancel_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _cancel_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.cycle is not None and not self.cycle.response_complete:
            # A response is being written: the next head waits for it, as it may.
            self._arm_head()
            return
        self._close()

    def _body_stalled(self) -> None:
        self._body_timer = None
        progressed = self._body_bytes >= MIN_BODY_PROGRESS
        if progressed or self.flow.read_paused:
            self._body_bytes = 0
            self._body_timer = self.loop.call_later(self._body_timeout_s, self._body_stalled)
            return
        self._close()

    def _close(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()
