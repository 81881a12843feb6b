"""The HTTP protocol `controlcenter serve` runs uvicorn with (`http=PROTOCOL`): the 431 limit
of `middleware/header_limit.py`, and an answer's writes coalesced into one.

uvicorn writes an answer's head and its body with one `transport.write` each, and each is a
`send` system call of its own at once: for the dashboard index's small answer the two calls
were a third of the request's samples (py-spy, `make bench`). `CoalescedWrites` keeps what
is written during one turn of the event loop and sends it together at the start of the next
turn, so a head and a body written back to back go out as one segment. An answer waits at
most for the rest of the loop's current turn; the order of the bytes never changes, and
closing or ending the connection sends what is pending first. The real transport, and so
uvicorn's flow control, sees the bytes at that next turn: an answer written whole without
yielding to the loop is held whole until then, as it was already held in memory to be
written.
"""

from __future__ import annotations

import asyncio
from typing import Any

from controlcenter.web.middleware.header_limit import HeaderLimitProtocol

PROTOCOL = "controlcenter.web.server_protocol:ServiceProtocol"


class CoalescedWrites:
    """A transport whose writes within one turn of the loop reach the socket as one. Every
    other call goes to the real transport (`__getattr__`), after the pending bytes when it
    ends or closes the stream."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def _flush(self) -> None:
        pending = self._pending
        if not pending:
            return
        self._pending = []
        if not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending = []
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._pending))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class ServiceProtocol(HeaderLimitProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        coalesced: Any = CoalescedWrites(transport, self.loop)  # a transport in all but type
        super().connection_made(coalesced)
