"""Chat runs independent of their HTTP connection.

Each run is its own asyncio task writing SSE frames into a channel; the response only reads
from it. When the client goes away the response stops reading and the channel drops further
frames, while the run goes on to save the assistant message: its events are stored as they are
sent (`chat.store`), so that the client can resume from any process (`chat.resume`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from controlcenter.chat import store
from controlcenter.chat.events import Event, event_data, frame_of
from controlcenter.chat.models import Message
from controlcenter.chat.signals import Signals
from controlcenter.chat.store import EventWriter, RunRecord
from controlcenter.common.logs import get_logger
from controlcenter.db import Database

log = get_logger(__name__)

_END = b""
STOP_POLL_S = 0.25  # SQLite: how often the runs of a process read their stop flags
PRUNE_EVERY_S = 600.0
WRITER_CLOSE_S = 5.0  # at shutdown: how long the last events may take to be stored


class EventChannel:
    """One stream's frames, in order; the run ends it with `close()`."""

    # Frames wait in a list, the reader on one future: an asyncio.Queue (four deques of
    # ~760 bytes, an Event) was ~3.5 KiB per open stream (BENCHMARKS.md, "branch mem3").
    __slots__ = ("_detached", "_frames", "_ids", "_reader", "run")

    def __init__(self, *, ids: bool = False) -> None:
        self._frames: list[bytes] = []
        self._reader: asyncio.Future[None] | None = None  # the reader waiting for a frame
        self._detached = False
        self._ids = ids  # `?ids=1`: frames carry `id: <messageId>:<n>`
        self.run: RunRecord | None = None  # set once the message has an id

    def begin(self, run: RunRecord, event: Event) -> None:
        """Send the run's first event, stored with the run (its number is 1)."""
        self.run = run
        self._put(event_data(event), 1)

    def send(self, event: Event) -> None:
        self.note(event)
        data = event_data(event)
        n = self.run.record(data) if self.run is not None else None
        self._put(data, n)

    async def end_with(self, event: Event, status: str, answer: Message) -> None:
        """Send the run's last event once it is stored with the run's end and its `answer`
        (`RunRecord.finish`). Raises what the database raised, and then nothing is sent."""
        assert self.run is not None
        data = event_data(event)
        n = await self.run.finish(status, data, answer)
        self.note(event)
        self._put(data, n)

    def note(self, event: Event) -> None:
        """Each event, as it is sent (for subclasses that watch them)."""

    def _put(self, data: str, n: int | None) -> None:
        if not self._detached:  # nobody reads any more: keep nothing
            event_id = f"{self.run.message_id}:{n}" if self._ids and self.run else None
            self._push(frame_of(data, event_id))

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


class ChatRuns:
    """The running chats of this process: kept referenced while they run, and awaited (for a
    bounded time) at shutdown so that replies being written are saved."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._tasks: set[asyncio.Task[None]] = set()
        self._running: dict[str, RunRecord] = {}
        self.signals = Signals(db, on_stop=self.stop_here, on_approval=self.poke_here)
        self.writer = EventWriter(db, self.signals)
        self._poller: asyncio.Task[None] | None = None
        self._next_prune = 0.0

    async def begin(self, user_id: str, conversation_id: Any, message: str) -> RunRecord | None:
        """A new run of this process, its turn stored (`store.start_turn`) and known to stops
        asked here or anywhere else; None when the conversation is not the user's."""
        message_id = store.new_message_id()
        started = await store.start_turn(
            self._db,
            user_id=user_id,
            conversation_id=conversation_id,
            message=message,
            answer_id=message_id,
        )
        if started is None:
            return None
        await self.signals.listen()
        run = RunRecord(self._db, self.signals, self.writer, message_id, started)
        self._running[message_id] = run
        if self._db.is_sqlite and self._poller is None:
            self._poller = asyncio.create_task(self._poll_stops())
        loop = asyncio.get_running_loop()
        if loop.time() >= self._next_prune:
            self._next_prune = loop.time() + PRUNE_EVERY_S
            self.start(self._prune())
        return run

    def forget(self, run: RunRecord) -> None:
        self._running.pop(run.message_id, None)

    def stop_here(self, message_id: str) -> None:
        """Stop the run if it runs in this process (a stop asked anywhere ends up here)."""
        run = self._running.get(message_id)
        if run is not None:
            run.stop()

    def poke_here(self, message_id: str) -> None:
        """The run's approval was answered (here or elsewhere): it reads it again."""
        run = self._running.get(message_id)
        if run is not None:
            run.poke()

    async def _poll_stops(self) -> None:
        try:
            while self._running:
                await asyncio.sleep(STOP_POLL_S)
                try:
                    asked = await store.stops_asked(self._db)
                except Exception as exc:
                    log.warning("chat stop flags unreadable", error=type(exc).__name__)
                    continue
                for message_id in asked:  # any process's: those running elsewhere are no-ops
                    self.stop_here(message_id)
        finally:
            self._poller = None

    async def _prune(self) -> None:
        try:
            await store.prune(self._db)
        except Exception as exc:
            log.warning("chat events not pruned", error=type(exc).__name__)

    def start(self, run: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(run)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout_s: float) -> None:
        try:
            await self._drain(timeout_s)
            await self.writer.close(WRITER_CLOSE_S)
        finally:
            await self.signals.aclose()

    async def _drain(self, timeout_s: float) -> None:
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
        for task in pending:
            task.cancel()
        if pending:
            log.warning("chat runs cancelled at shutdown", count=len(pending))
            await asyncio.wait(pending, timeout=1.0)
