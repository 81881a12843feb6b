"""Chat runs independent of their HTTP connection.

Each run is its own asyncio task writing SSE frames into a channel; the response only reads
from it. When the client goes away the response stops reading and the channel drops further
frames, while the run goes on to save the assistant message.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from controlcenter.chat.events import Event, frame
from controlcenter.common.logs import get_logger

log = get_logger(__name__)

_END = b""


class EventChannel:
    """One stream's frames, in order; the run ends it with `close()`."""

    __slots__ = ("_detached", "_queue")

    def __init__(self) -> None:
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._detached = False

    def send(self, event: Event) -> None:
        if not self._detached:  # nobody reads any more: keep nothing
            self._queue.put_nowait(frame(event))

    def close(self) -> None:
        if not self._detached:
            self._queue.put_nowait(_END)

    async def frames(self) -> AsyncIterator[bytes]:
        """What the response writes, each frame as soon as it exists."""
        try:
            while (chunk := await self._queue.get()) != _END:
                yield chunk
        finally:
            self._detached = True
            while not self._queue.empty():
                self._queue.get_nowait()


class ChatRuns:
    """The running chats of this process: kept referenced while they run, and awaited (for a
    bounded time) at shutdown so that replies being written are saved."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, run: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(run)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout_s: float) -> None:
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
        for task in pending:
            task.cancel()
        if pending:
            log.warning("chat runs cancelled at shutdown", count=len(pending))
            await asyncio.wait(pending, timeout=1.0)
