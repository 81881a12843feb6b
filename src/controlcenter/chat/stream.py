"""The chat runs of a process, independent of their HTTP connection.

Each run is its own asyncio task writing frames into its channel (`chat.channel`); a client
that goes away does not stop it, and its events are stored as they are sent (`chat.store`), so
that the client can resume from any process (`chat.resume`). Stops asked in any process reach
the run here, and at shutdown the runs get a bounded time to finish.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from controlcenter.chat import store
from controlcenter.chat.channel import EventChannel
from controlcenter.chat.signals import Signals
from controlcenter.chat.store import EventWriter, RunRecord
from controlcenter.common.logs import get_logger
from controlcenter.db import Database

log = get_logger(__name__)

STOP_POLL_S = 0.25  # SQLite: how often the runs of a process read their stop flags
PRUNE_EVERY_S = 600.0
WRITER_CLOSE_S = 5.0  # at shutdown: how long the last events may take to be stored


class ChatRuns:
    """The running chats of this process: kept referenced while they run, and awaited (for a
    bounded time) at shutdown so that replies being written are saved."""

    def __init__(self, db: Database, owner: str | None = None) -> None:
        """`owner`: the process's `chat.liveness` id, written with each run (None: runs that
        no liveness watches, as in some tests)."""
        self._db = db
        self._owner = owner
        self._tasks: set[asyncio.Task[None]] = set()
        self._running: dict[str, RunRecord] = {}
        self.signals = Signals(db, on_stop=self.stop_here, on_approval=self.poke_here)
        self.writer = EventWriter(db, self.signals)
        self._poller: asyncio.Task[None] | None = None
        self._next_prune = 0.0

    async def begin(
        self,
        user_id: str,
        conversation_id: Any,
        message: str,
        channel: EventChannel,
        replace: str | None = None,
    ) -> RunRecord | None:
        """A new run of this process sending into `channel`, its turn stored
        (`store.start_turn`, then `message_start` sent) and known to stops asked here or
        anywhere else; None when the conversation is not the user's. `replace`: as
        `store.start_turn`'s (it raises TurnRefusedError)."""
        if self._db.is_sqlite and self._poller is None:
            self._poller = asyncio.create_task(self._poll_stops())
        loop = asyncio.get_running_loop()
        if loop.time() >= self._next_prune:
            self._next_prune = loop.time() + PRUNE_EVERY_S
            self.start(self._prune())
        message_id = store.new_message_id()
        started = await store.start_turn(
            self._db,
            user_id=user_id,
            conversation_id=conversation_id,
            message=message,
            answer_id=message_id,
            owner=self._owner,
            replace=replace,
        )
        if started is None:
            return None
        await self.signals.listen()
        run = RunRecord(self._db, self.signals, self.writer, message_id, started, channel)
        self._running[message_id] = run
        run.begin()
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
            while True:
                await asyncio.sleep(STOP_POLL_S)
                if not self._running:
                    return
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
