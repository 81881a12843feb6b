"""The chat runs of a process, independent of their HTTP connection.

Each run is its own asyncio task writing frames into its channel (`chat.channel`); a client
that goes away does not stop it, and its events are stored as they are sent
(`chat.run.writer`), so that the client can resume from any process (`chat.resume`). At
shutdown the runs get a bounded time to finish, and the writer a bounded time to store what
is pending.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from controlcenter.chat.channel import EventChannel
from controlcenter.chat.run.record import RunRecord
from controlcenter.chat.run.start import new_message_id, start_turn
from controlcenter.chat.run.stored import prune
from controlcenter.chat.run.writer import EventWriter
from controlcenter.chat.signals import Signals
from controlcenter.common.logs import get_logger
from controlcenter.db import Database

log = get_logger(__name__)

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
        self.signals = Signals(db)
        self.writer = EventWriter(db, self.signals)
        self._next_prune = 0.0

    async def begin(
        self,
        user_id: str,
        conversation_id: str | None,
        message: str,
        channel: EventChannel,
        replace: str | None = None,
    ) -> RunRecord | None:
        """A new run of this process sending into `channel`, its turn stored (`start_turn`,
        then `message_start` sent) and told of stops and approvals asked here or anywhere
        else; None when the conversation is not the user's. `replace`: as `start_turn`'s (it
        raises TurnRefusedError)."""
        loop = asyncio.get_running_loop()
        if loop.time() >= self._next_prune:
            self._next_prune = loop.time() + PRUNE_EVERY_S
            self.start(self._prune())
        message_id = new_message_id()
        started = await start_turn(
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
        flags = self.signals.enlist(message_id)
        run = RunRecord(self._db, self.signals, self.writer, message_id, started, channel, flags)
        run.begin()
        return run

    async def _prune(self) -> None:
        try:
            await prune(self._db)
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
