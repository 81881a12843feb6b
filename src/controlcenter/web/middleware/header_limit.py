"""Refuse requests whose head (request line and headers) is over 16 KiB with 431.

uvicorn's httptools parser has no limit of its own: httptools collects each header's name and
value in memory until it ends, so a single 64 MiB header costs 64 MiB. This protocol feeds the
parser at most the limit's worth of a request's head; a head that has not ended by then is
answered 431 without the parser (or anything else) holding more of it.

`controlcenter serve` runs uvicorn with it (as `client_timeouts.py`'s subclass): an ASGI
middleware sees a head only once the parser has taken all of it, and httptools joins the pieces
of a header value by concatenating bytes, so behind such a middleware a 64 MiB header goes
unanswered for more than 30 s. The head is counted per request; a request pipelined right
behind another on the same connection may get up to twice the limit before the count notices
(the parser does not say where in the bytes it was fed a message ended), which bounds memory
all the same.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from controlcenter.web.middleware.raw_answer import json_body

HEADER_LIMIT = 16 * 1024
# After the answer the connection stays open this long, reading and dropping what the client
# still sends: closing with unread data makes the kernel reset the connection, and a client
# still writing its header would then never see the 431.
DRAIN_S = 2.0
_BODY = json_body({"error": "Request header fields too large"})
_ANSWER = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: application/json\r\n"
    b"content-length: " + str(len(_BODY)).encode() + b"\r\n"
    b"connection: close\r\n\r\n" + _BODY
)


class HeaderLimitProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._head_bytes = 0
        self._refused = False

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # draining: see DRAIN_S
        while data and self._in_head:
            if self._head_bytes >= HEADER_LIMIT:  # the head goes on past the limit
                self._refuse()
                return
            room = HEADER_LIMIT - self._head_bytes
            piece, data = data[:room], data[room:]
            self._head_bytes += len(piece)
            super().data_received(piece)
            if self.transport.is_closing():
                return  # the parser refused the request (400)
        if data:
            super().data_received(data)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        super().on_message_complete()

    def _refuse(self) -> None:
        self._refused = True
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(_ANSWER)
        # else a response is being written on this connection: cut it short, answer nothing.
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(DRAIN_S, self.transport.close)
        else:
            self.transport.close()
