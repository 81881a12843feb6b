"""One chat stream's frames, between the run that writes them and the response that reads them.

The run is its own asyncio task; the response only reads from the channel. When the client
goes away the response stops reading and the channel drops further frames (nothing
accumulates), while the run goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from controlcenter.chat.events import Event, event_data, frame_of

_END = b""


class EventChannel:
    """One stream's frames, in order; the run ends it with `close()`."""

    # Frames wait in a list, the reader on one future: an asyncio.Queue (four deques and an
    # Event) holds several times more memory per open stream.
    __slots__ = ("_detached", "_frames", "_ids", "_reader")

    def __init__(self, *, ids: bool = False) -> None:
        self._frames: list[bytes] = []
        self._reader: asyncio.Future[None] | None = None  # the reader waiting for a frame
        self._detached = False
        self._ids = ids  # `?ids=1`: frames carry `id: <messageId>:<n>`

    def send(self, event: Event, event_id: str | None = None, data: str | None = None) -> None:
        """The event as a frame (`data`: its JSON text, when the caller has it already); its
        `id:` line only when the client asked for ids."""
        self.note(event)
        if not self._detached:  # nobody reads any more: keep nothing
            text = data if data is not None else event_data(event)
            self._push(frame_of(text, event_id if self._ids else None))

    def note(self, event: Event) -> None:
        """Each event, as it is sent (for subclasses that watch them)."""

    def end_unstored(self, last: Event | None) -> None:
        """The run's end could not be stored: its `last` event, if any, is sent all the same
        (live only), and the stream ends as any other."""
        if last is not None:
            self.send(last)

    def close(self) -> None:
        if not self._detached:
            self._push(_END)

    def _push(self, chunk: bytes) -> None:
        self._frames.append(chunk)
        if self._reader is not None and not self._reader.done():
            self._reader.set_result(None)

    async def frames(self) -> AsyncIterator[bytes]:
        """What the response writes, each frame as soon as it exists."""
        try:
            while True:
                while not self._frames:
                    self._reader = asyncio.get_running_loop().create_future()
                    try:
                        await self._reader
                    finally:
                        self._reader = None
                chunks, self._frames = self._frames, []
                for chunk in chunks:
                    if chunk == _END:
                        return
                    yield chunk
        finally:
            self._detached = True
            self._frames = []
