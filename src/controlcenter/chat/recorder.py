"""One run's events on their way to the database, and its stop flag.

Events are numbered as they are sent (message_start is 1) and written in the background, in
batches: the live stream never waits for the database, and a run that sends several events at
once writes them in one transaction. The first event is written with the run's row before it
is sent, so that a client holding a message id can always find the message."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from contextlib import suppress
from typing import TypeVar

from controlcenter.chat import run_store
from controlcenter.chat.run_store import RunUsage, StoredEvent
from controlcenter.chat.signals import Signals
from controlcenter.common.logs import get_logger
from controlcenter.db import Database

log = get_logger(__name__)

T = TypeVar("T")


class RunRecord:
    def __init__(self, db: Database, signals: Signals, message_id: str) -> None:
        self.message_id = message_id
        self._db = db
        self._signals = signals
        self._n = 0
        self._pending: list[StoredEvent] = []
        self._flusher: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._poked = asyncio.Event()
        self.awaiting_approval = False
        self.usage = RunUsage()

    def count_provider_call(self, input_tokens: int, output_tokens: int) -> None:
        used = self.usage
        self.usage = RunUsage(
            used.input_tokens + input_tokens,
            used.output_tokens + output_tokens,
            used.provider_calls + 1,
            used.tool_calls,
        )

    def count_tool_call(self) -> None:
        used = self.usage
        self.usage = RunUsage(
            used.input_tokens, used.output_tokens, used.provider_calls, used.tool_calls + 1
        )

    async def begin(self, user_id: str, data: str) -> int:
        self._n = 1
        await run_store.create_run(self._db, self.message_id, user_id, (1, data))
        self._signals.wake(self.message_id)
        return 1

    def record(self, data: str) -> int:
        self._n += 1
        self._pending.append((self._n, data))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush())
        return self._n

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    await run_store.append_events(self._db, self.message_id, batch)
                except Exception as exc:
                    # Kept for the final write; the live stream is not affected.
                    self._pending[:0] = batch
                    log.warning("chat events not stored yet", error=type(exc).__name__)
                    return
                self._signals.wake(self.message_id)
        finally:
            self._flusher = None

    async def finish(self, status: str) -> None:
        """The remaining events and the run's end, in one transaction."""
        if self._flusher is not None:
            with suppress(Exception):
                await self._flusher
        batch, self._pending = self._pending, []
        await run_store.append_events(
            self._db, self.message_id, batch, status=status, usage=self.usage
        )
        self._signals.wake(self.message_id)

    # The stop (CONTRACT 11): no provider or tool call starts once it is asked.

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
        self._poked.set()

    def poke(self) -> None:
        """An approval of this run may have been answered: read it again."""
        self._poked.set()

    async def approval(self, tool_call_id: str, timeout_s: float) -> str:
        """Wait for the user's answer to a call that writes: APPROVED, DENIED, EXPIRED (no
        answer in time) or STOPPED (the message was stopped meanwhile)."""
        await run_store.ask_approval(self._db, self.message_id, tool_call_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self.awaiting_approval = True
        try:
            while True:
                self._poked.clear()
                status = await run_store.approval_status(self._db, self.message_id, tool_call_id)
                if status is not None and status != run_store.PENDING:
                    return status
                if self.stopped:
                    return run_store.STOPPED
                remaining = deadline - loop.time()
                if remaining <= 0:
                    if await run_store.expire_approval(self._db, self.message_id, tool_call_id):
                        return run_store.EXPIRED
                    continue  # answered just now
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._poked.wait(), remaining)
        finally:
            self.awaiting_approval = False

    async def unless_stopped(self, call: Awaitable[T]) -> T | None:
        """The call's result, or None when a stop comes first (the call is then cancelled:
        the provider's answer would not be used)."""
        task = asyncio.ensure_future(call)
        if self._stop.is_set():
            task.cancel()
            return None
        stopper = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait((task, stopper), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            if not task.done():
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
        if task.cancelled():
            return None
        return task.result()
