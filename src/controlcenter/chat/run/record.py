"""One run of this process, as its loop talks to it: its events, numbered and sent to its
channel and to the process's event writer; its usage; its stop and approvals (the flags
`chat.signals` sets for it); its end."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from contextlib import suppress
from typing import Any, TypeVar

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql import Executable

from controlcenter.chat.channel import EventChannel
from controlcenter.chat.events import Event, error, event_data, message_complete, message_start
from controlcenter.chat.fold import Fold
from controlcenter.chat.models import (
    DONE,
    EXPIRED,
    PENDING,
    STOPPED,
    ChatApproval,
    Message,
)
from controlcenter.chat.run.answer import assistant_message
from controlcenter.chat.run.start import StartedTurn
from controlcenter.chat.run.writer import EventWriter, RunEnd, RunUsage
from controlcenter.chat.schemas import message_json
from controlcenter.chat.signals import RunFlags, Signals
from controlcenter.common.logs import get_logger
from controlcenter.db import Database

log = get_logger(__name__)


T = TypeVar("T")
CONVERSATION_DELETED = "The conversation was deleted"


class RunRecord:
    """One run of this process, what its loop talks to: its events, numbered (`message_start`
    is 1, stored with the run), stored and sent to its channel; its usage, its stop flag, its
    approvals and its end."""

    def __init__(
        self,
        db: Database,
        signals: Signals,
        writer: EventWriter,
        message_id: str,
        started: StartedTurn,
        channel: EventChannel,
        flags: RunFlags,
    ) -> None:
        """`flags`: what `Signals` tells the run (`Signals.enlist`)."""
        self.message_id = message_id
        self.conversation_id = started.conversation_id
        self.history = started.history
        self.message = started.message  # the user's message it answers
        self.usage = RunUsage()
        self.answer = Fold()  # the answer so far: the events sent, folded
        self._db = db
        self._signals = signals
        self._writer = writer
        self._channel = channel
        self._n = 1
        self._ended = False
        self._flags = flags

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

    def waiting(self) -> None:
        """The run is about to call its provider: its events may be written now
        (`EventWriter.write_soon`), on the loop's next turn, behind the call's first step
        (the request is sent before the write, not after it)."""
        asyncio.get_running_loop().call_soon(self._writer.write_soon)

    def store_with_events(self, statement: Executable, params: Mapping[str, Any]) -> None:
        """A write of the run's tools (the ledger's end of a call), stored in the transaction
        of the run's next events (`EventWriter.add_write`)."""
        self._writer.add_write(self.message_id, self.conversation_id, statement, params)

    def begin(self) -> None:
        """Send `message_start`, stored with the run's row."""
        start = message_start(self.conversation_id, self.message_id)
        self.answer.add(start)
        self._channel.send(start, self._id(1))

    def send(self, event: Event) -> None:
        """An event after `message_start`: sent at once, stored behind the stream."""
        data = event_data(event)
        self.answer.add(event)
        self._n += 1
        self._writer.add(self.message_id, (self._n, data))
        self._channel.send(event, self._id(self._n), data)

    async def finish(
        self,
        status: str,
        last: Event | None = None,
        answer: Message | None = None,
        gone: Event | None = None,
    ) -> None:
        """The run's end, stored after its events with its `last` event and its `answer`;
        `last` is sent once they are stored. When the answer's conversation is found deleted
        in that write, `gone` (if given) is stored and sent instead and the run ends stopped.
        Raises what the database raised, and then nothing of `last`, the answer or the end is
        stored or sent (the run may still `send` and `finish`). Nothing more once the run has
        ended."""
        if self._ended:
            return
        n = self._n + 1
        stored = [(n, event_data(last))] if last is not None else []
        instead = [(n, event_data(gone))] if gone is not None else None
        end = RunEnd(status, self.usage, answer, self.conversation_id)
        kept = await self._writer.end(self.message_id, end, stored, instead)
        self._ended = True
        sent, texts = (last, stored) if kept else (gone, instead)
        if sent is not None and texts:
            self._n = n
            self._channel.send(sent, self._id(n), texts[0][1])

    async def complete(self) -> None:
        """The run's end with its answer, as its events made it (`chat.fold`): in one write
        the assistant message, the events still pending, `message_complete` (sent once
        stored) and the run's end. A run whose conversation was deleted (which stopped it)
        has no conversation to save the answer in: that write finds it so, and the run ends
        with the error that says so instead."""
        message = assistant_message(
            self.conversation_id, self.message_id, self.answer, usage=self.usage.json()
        )
        last = message_complete(message_json(message), stopped=self.stopped)
        status = STOPPED if self.stopped else DONE
        await self.finish(status, last, message, gone=error(CONVERSATION_DELETED))

    def _id(self, n: int) -> str:
        return f"{self.message_id}:{n}"

    # The stop: no provider or tool call starts once it is asked.

    @property
    def stopped(self) -> bool:
        return self._flags.stop.is_set()

    def dismiss(self) -> None:
        """The run no longer listens for its stop or its approvals."""
        self._signals.dismiss(self.message_id)

    async def unless_stopped(self, call: Awaitable[T]) -> T | None:
        """The call's result, or None when a stop comes first (the call is then cancelled:
        the provider's answer would not be used)."""
        task = asyncio.ensure_future(call)
        if self.stopped:
            task.cancel()
            return None
        stopper = asyncio.create_task(self._flags.stop.wait())
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

    async def ask_approval(self, tool_call_id: str) -> None:
        """Store the call's pending approval. Before the event that asks for it is sent: an
        answer sent the moment that event arrives must find it."""
        await self._db.run_write(_add_approval, self.message_id, tool_call_id)

    async def approval(self, tool_call_id: str, timeout_s: float) -> str:
        """Wait for the user's answer to a call asked with `ask_approval`: APPROVED, DENIED,
        EXPIRED (no answer in time) or STOPPED (the message was stopped meanwhile).

        An answer given in this process, or notified (PostgreSQL), wakes the wait at once
        (`Signals.poke`). Nothing notifies an answer given in another process on SQLite, and a
        notification is lost while the LISTEN connection is down, so the answer is also read
        again every `Signals.poll_s`: late by that much at worst, never missed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            self._flags.poked.clear()  # before the read: a poke during it means read again
            status = await self._db.run_read(_approval_status, self.message_id, tool_call_id)
            if status is not None and status != PENDING:
                return status
            if self.stopped:
                return STOPPED
            remaining = deadline - loop.time()
            if remaining <= 0:
                if await self._db.run_write(_expire_approval, self.message_id, tool_call_id):
                    return EXPIRED
                continue  # answered just now
            pause = min(remaining, self._signals.poll_s)
            with suppress(TimeoutError):
                await asyncio.wait_for(self._flags.poked.wait(), pause)


def _add_approval(session: Session, message_id: str, tool_call_id: str) -> None:
    session.add(ChatApproval(message_id=message_id, tool_call_id=tool_call_id, status=PENDING))


# Built once: a run waiting for an approval reads it every `Signals.poll_s`. The parameters
# are not named after columns: an UPDATE reserves those names for the values it sets.
_APPROVAL_CALL = (
    ChatApproval.message_id == bindparam("b_message_id"),
    ChatApproval.tool_call_id == bindparam("b_tool_call_id"),
)
_APPROVAL_STATUS = select(ChatApproval.status).where(*_APPROVAL_CALL)
_EXPIRE_APPROVAL = (
    update(ChatApproval)
    .where(*_APPROVAL_CALL, ChatApproval.status == PENDING)
    .values(status=EXPIRED)
)


def _approval_status(session: Session, message_id: str, tool_call_id: str) -> str | None:
    """The call's approval status; None when it has none."""
    return session.scalar(
        _APPROVAL_STATUS, {"b_message_id": message_id, "b_tool_call_id": tool_call_id}
    )


def _expire_approval(session: Session, message_id: str, tool_call_id: str) -> bool:
    """The call's approval marked expired if it is still pending; whether it was."""
    expired = session.execute(
        _EXPIRE_APPROVAL, {"b_message_id": message_id, "b_tool_call_id": tool_call_id}
    )
    return bool(expired.rowcount)  # type: ignore[attr-defined]
