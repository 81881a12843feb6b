"""A chat run's persistence, in one place: the conversation and its messages as a turn writes
them, the run's row, its stored events, and what other processes store for it (a stop, an
approval's answer). Every process and instance shares it through the database.

A turn starts in one write: the conversation (created or continued), the user's message, the
run's row and its first event (`message_start`), so a client holding a message id always finds
the message. The other events are written behind the live stream by one `EventWriter` per
process: the events and ends of all its runs are gathered over a short window (`WINDOW_S`) and
written in one transaction, so a hundred chats streaming at once cost a few transactions a
second, not hundreds. A run's end is written at once, with its last events and its answer (the
assistant message), and awaited until it is stored.

On PostgreSQL each write that waiters in other processes wait for also notifies them (in the
same transaction, delivered at its commit); `chat.signals` listens. This module calls nothing
above it: the agent and the stream call it.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import string
import time
from collections.abc import Awaitable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, TypeVar, cast

from sqlalchemy import Table, bindparam, delete, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from controlcenter.chat.channel import EventChannel
from controlcenter.chat.conversations import LAST_ANSWER, revise_last_turn
from controlcenter.chat.events import Event, event_data, message_start
from controlcenter.chat.fold import Fold
from controlcenter.chat.locks import hold_conversations, hold_owned
from controlcenter.chat.models import RUNNING as RUNNING  # a run's status, for its readers
from controlcenter.chat.models import (
    STOPS_ASKED,
    ChatApproval,
    ChatEventRow,
    ChatRun,
    ConversationRow,
    Message,
    RunningMessage,
)
from controlcenter.chat.signals import APPROVAL_CHANNEL, EVENTS_CHANNEL, Signals
from controlcenter.chat.stops import ask_stop
from controlcenter.common.logs import get_logger
from controlcenter.db import Database, new_id, utcnow
from controlcenter.db.notifications import notify
from controlcenter.web.validation import text_problem

log = get_logger(__name__)

T = TypeVar("T")

DONE = "done"
STOPPED = "stopped"
FAILED = "failed"
INTERRUPTED = "interrupted"  # closed by another process after its own died
PENDING = "pending"
APPROVED = "approved"
DENIED = "denied"
EXPIRED = "expired"
USER = "user"
ASSISTANT = "assistant"
TITLE_LENGTH = 100  # characters (code points), not bytes
KEPT_FOR = timedelta(hours=24)
WINDOW_S = 0.05  # how long events wait to share a transaction; the live stream never waits
RETRY_MAX_S = 1.0  # the longest pause between attempts while the database refuses
_BASE36 = string.digits + string.ascii_lowercase

StoredEvent = tuple[int, str]  # (n, the event's JSON text)

_EVENTS = cast(Table, ChatEventRow.__table__)
_RUNS = cast(Table, ChatRun.__table__)
_CONVERSATIONS = cast(Table, ConversationRow.__table__)
_MESSAGES = cast(Table, Message.__table__)
_RUNNING_MESSAGES = cast(Table, RunningMessage.__table__)
# One statement for any number of rows each (executemany).
_END_RUN = (
    update(_RUNS)
    .where(_RUNS.c.message_id == bindparam("run"))
    .values(
        status=bindparam("status"),
        input_tokens=bindparam("input_tokens"),
        output_tokens=bindparam("output_tokens"),
        provider_calls=bindparam("provider_calls"),
        tool_calls=bindparam("tool_calls"),
    )
)
_TOUCH = (
    update(_CONVERSATIONS)
    .where(_CONVERSATIONS.c.id == bindparam("conversation"))
    .values(updated_at=bindparam("now"))
)
# The poll's condition is the partial index's own (`models.STOPS_ASKED`), as its text: SQLite
# uses a partial index only for a query whose WHERE holds the index's terms as written, and
# renders a boolean column compared (`stop_requested = 1`), which does not match.
_STOPS_ASKED = select(ChatRun.message_id).where(text(STOPS_ASKED))


def new_message_id() -> str:
    """`msg_<epoch ms>_<9 random base36 chars>`."""
    suffix = "".join(secrets.choice(_BASE36) for _ in range(9))
    return f"msg_{int(time.time() * 1000)}_{suffix}"


@dataclass(frozen=True)
class RunUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    provider_calls: int = 0
    tool_calls: int = 0

    def json(self) -> dict[str, int]:
        """The message's `usage` field."""
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "providerCalls": self.provider_calls,
        }


@dataclass(frozen=True)
class RunEnd:
    status: str
    usage: RunUsage
    answer: Message | None = None  # the assistant message, saved with the end
    conversation_id: str | None = None  # its row is locked first (`chat.locks`)


class Answer(Enum):
    """What an approval's answer met."""

    DONE = "done"
    CONFLICT = "conflict"
    NOT_FOUND = "not_found"


class StopAnswer(Enum):
    ASKED = "asked"
    NOT_RUNNING = "not_running"
    NOT_FOUND = "not_found"


@dataclass(frozen=True)
class StoredText:
    """One stored message as the model reads it again."""

    role: str
    content: str


@dataclass(frozen=True)
class StartedTurn:
    conversation_id: str
    history: tuple[StoredText, ...]  # the stored messages before this one, empty ones left out
    message: str = ""  # the user's message the run answers


# -- a turn's start and its answer ---------------------------------------------------------------


async def start_turn(
    db: Database,
    *,
    user_id: str,
    conversation_id: Any,
    message: str,
    answer_id: str,
    owner: str | None = None,
    replace: str | None = None,
) -> StartedTurn | None:
    """In one write: the conversation (created when `conversation_id` is None, else continued
    when it is the caller's), the user's message, the run of the answer `answer_id` with its
    first event, `message_start`, and, with `owner` (the process's `chat.liveness` id), the
    answer's liveness row. None when the conversation is not the caller's (any value that does
    not name one of theirs, a number included): nothing is saved then.

    `replace` (a continued conversation only; `conversations.revise_last_turn`): its last
    answer (`lastAnswer`: the last user message is answered again, not saved again) or its
    last user message with its answer (`lastMessage`: `message` takes its place) are deleted
    first, in the same write. Raises TurnRefusedError (nothing saved) when an answer of the
    conversation still runs or it has no message to answer again."""
    now = utcnow()
    save_message = True
    async with db.write() as session:
        if conversation_id is None:
            conversation_id = new_id()
            history: tuple[StoredText, ...] = ()
            title = message[:TITLE_LENGTH]
            await session.execute(
                insert(_CONVERSATIONS).values(
                    id=conversation_id, user_id=user_id, title=title, created_at=now, updated_at=now
                )
            )
        else:
            if not isinstance(conversation_id, str) or text_problem(conversation_id) is not None:
                return None  # no id holds NUL or a lone surrogate, and PostgreSQL refuses it
            # First, as every writer of a conversation's rows does (`chat.locks`).
            if await hold_owned(session, user_id, conversation_id) is None:
                return None
            await session.execute(_TOUCH, {"conversation": conversation_id, "now": now})
            if replace is not None:
                message = await revise_last_turn(
                    session, conversation_id, replace, message, TITLE_LENGTH
                )
            history = await _history(session, conversation_id)
            if replace == LAST_ANSWER:
                history = history[:-1]  # the message answered again, already saved
                save_message = False
        if save_message:
            await session.execute(
                insert(_MESSAGES).values(
                    id=new_message_id(),
                    conversation_id=conversation_id,
                    role=USER,
                    content=message,
                    created_at=now,
                    interrupted=False,
                )
            )
        await session.execute(
            insert(_RUNS).values(
                message_id=answer_id,
                user_id=user_id,
                conversation_id=conversation_id,
                status=RUNNING,
                created_at=now,
                stop_requested=False,
                input_tokens=0,
                output_tokens=0,
                provider_calls=0,
                tool_calls=0,
            )
        )
        first = event_data(message_start(conversation_id, answer_id))
        await session.execute(insert(_EVENTS).values(message_id=answer_id, n=1, data=first))
        if owner is not None:
            # With the run, not after it: a process that dies at any moment after this commit
            # leaves a row whose heartbeat goes stale, and another process closes the run.
            await session.execute(
                insert(_RUNNING_MESSAGES).values(
                    message_id=answer_id, owner=owner, heartbeat_at=now
                )
            )
        await notify(session, EVENTS_CHANNEL, [answer_id])
    return StartedTurn(conversation_id=conversation_id, history=history, message=message)


async def _history(session: AsyncSession, conversation_id: str) -> tuple[StoredText, ...]:
    """The stored messages of the conversation, oldest first, empty ones left out (the APIs
    reject empty text)."""
    rows = await session.execute(
        select(Message.role, Message.content)
        .where(Message.conversation_id == conversation_id, Message.content != "")
        .order_by(Message.seq)
    )
    return tuple(StoredText(role, content) for role, content in rows)


def assistant_message(
    conversation_id: str,
    message_id: str,
    answer: Fold,
    *,
    usage: dict[str, int] | None = None,
    interrupted: bool = False,
    created_at: datetime | None = None,
) -> Message:
    """The answer's row as its events made it (`chat.fold`), not saved yet: a run saves it
    with its end (`RunRecord.finish`), another process when it closes the run of a dead one
    (`interrupted`)."""
    return Message(
        id=message_id,
        conversation_id=conversation_id,
        role=ASSISTANT,
        content=answer.content,
        tool_calls=list(answer.tool_calls) or None,
        tool_results=list(answer.tool_results) or None,
        parts=[dict(part) for part in answer.parts],
        usage=usage,
        created_at=created_at or utcnow(),
        interrupted=interrupted,
    )


# -- the events, written a window at a time ----------------------------------------------------


@dataclass(slots=True)
class _Ending:
    end: RunEnd
    last: list[StoredEvent]  # its last events, stored with the end or not at all
    done: asyncio.Future[None]


@dataclass
class _Pending:
    events: dict[str, list[StoredEvent]] = field(default_factory=dict)
    ends: dict[str, _Ending] = field(default_factory=dict)

    def runs(self) -> list[str]:
        return list({**self.events, **self.ends})

    def of(self, message_id: str) -> _Pending:
        one = _Pending()
        if message_id in self.events:
            one.events[message_id] = self.events[message_id]
        if message_id in self.ends:
            one.ends[message_id] = self.ends[message_id]
        return one


class EventWriter:
    """The events and ends of every run of this process, written a window at a time; an end
    is written at once (with whatever is pending), or right after the write under way."""

    def __init__(self, db: Database, signals: Signals, window_s: float = WINDOW_S) -> None:
        self._db = db
        self._signals = signals
        self._window_s = window_s
        self._pending = _Pending()
        self._task: asyncio.Task[None] | None = None
        self._waking: asyncio.Future[None] | None = None  # the window's wait
        self._last_write = -math.inf  # when the last write began (the loop's clock)

    def add(self, message_id: str, event: StoredEvent) -> None:
        self._pending.events.setdefault(message_id, []).append(event)
        self._kick()

    async def end(self, message_id: str, end: RunEnd, last: Sequence[StoredEvent] = ()) -> None:
        """The run's end after its pending events, with its `last` events and its answer:
        returns once stored. Raises what the database raised if they could not be, and then
        nothing of `last`, the answer or the end is stored (the pending events are kept)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.ends[message_id] = _Ending(end, list(last), done)
        self._kick()
        self._wake()
        await done

    def write_soon(self) -> None:
        """A run is about to wait (for its provider): what is pending may be written now,
        while the process is busy with that run anyway, unless a write began less than a
        window ago (so that under load the writes stay a window apart)."""
        if asyncio.get_running_loop().time() - self._last_write >= self._window_s:
            self._wake()

    async def close(self, timeout_s: float) -> None:
        """At shutdown: what is pending, written within `timeout_s` if the database allows."""
        task = self._task
        if task is None:
            return
        self._wake()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout_s)
        except TimeoutError:
            task.cancel()
            log.warning("chat events not stored at shutdown", runs=len(self._pending.runs()))
            for ending in self._pending.ends.values():
                _fail(ending.done, TimeoutError("chat events not stored at shutdown"))

    def _wake(self) -> None:
        if self._waking is not None and not self._waking.done():
            self._waking.set_result(None)

    def _kick(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def _pause(self, pause_s: float) -> None:
        """`pause_s`, or less when woken meanwhile (an end, `write_soon`)."""
        loop = asyncio.get_running_loop()
        self._waking = loop.create_future()
        timer = loop.call_later(pause_s, self._wake)
        try:
            await self._waking
        finally:
            timer.cancel()
            self._waking = None

    async def _run(self) -> None:
        pause = self._window_s
        try:
            while self._pending.events or self._pending.ends:
                if not self._pending.ends or pause > self._window_s:
                    # After a refusal, the whole pause: the database is not hurried.
                    await self._pause(pause)
                self._last_write = asyncio.get_running_loop().time()
                batch, self._pending = self._pending, _Pending()
                failed = await self._write(batch)
                if failed:
                    failed = await _still_running(self._db, failed)
                for message_id, kept in failed.items():  # tried again, before newer events
                    self._pending.events[message_id] = kept + self._pending.events.get(
                        message_id, []
                    )
                pause = min(pause * 2, RETRY_MAX_S) if failed else self._window_s
        finally:
            if self._task is asyncio.current_task():  # not a later one, after a cancel
                self._task = None

    async def _write(self, batch: _Pending) -> dict[str, list[StoredEvent]]:
        """One transaction for all; when it fails, each run alone, so that one run's bad
        write loses nothing of the others. The events of runs still to be written."""
        try:
            await _write_batch(self._db, batch)
        except Exception as exc:
            if len(batch.runs()) == 1:
                return self._failed(batch, exc)
            log.warning("chat events: batch refused, writing run by run", error=type(exc).__name__)
        else:
            self._stored(batch)
            return {}
        failed: dict[str, list[StoredEvent]] = {}
        for message_id in batch.runs():
            one = batch.of(message_id)
            try:
                await _write_batch(self._db, one)
            except Exception as exc:
                failed.update(self._failed(one, exc))
            else:
                self._stored(one)
        return failed

    def _stored(self, batch: _Pending) -> None:
        for message_id in batch.runs():
            self._signals.wake(message_id)
        for ending in batch.ends.values():
            if not ending.done.done():
                ending.done.set_result(None)

    def _failed(self, batch: _Pending, exc: Exception) -> dict[str, list[StoredEvent]]:
        """A run's events are kept to be tried again; its end, last events and answer are
        not, and its caller is told."""
        log.warning("chat events not stored yet", error=type(exc).__name__)
        for ending in batch.ends.values():
            _fail(ending.done, exc)
        return {message_id: kept for message_id, kept in batch.events.items() if kept}


async def _still_running(
    db: Database, failed: dict[str, list[StoredEvent]]
) -> dict[str, list[StoredEvent]]:
    """`failed` without the runs that no longer run: deleted with their user, or closed as
    interrupted by a process that took this one for dead. Their events can never be stored
    (nor in order), and trying again would go on for the process's whole life."""
    try:
        async with db.read() as session:
            found = select(ChatRun.message_id).where(
                ChatRun.message_id.in_(list(failed)), ChatRun.status == RUNNING
            )
            running = set((await session.scalars(found)).all())
    except Exception:
        return failed  # the database is down: everything is tried again
    if len(running) < len(failed):
        log.warning(
            "chat events dropped: their run no longer runs", runs=len(failed) - len(running)
        )
    return {message_id: kept for message_id, kept in failed.items() if message_id in running}


def _fail(future: asyncio.Future[None], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


async def _write_batch(db: Database, batch: _Pending) -> None:
    """The answers (each touching its conversation), the events and the runs' ends of
    `batch` in one transaction; readers in other processes notified of each run."""
    events = [
        {"message_id": message_id, "n": n, "data": data}
        for message_id, stored in batch.events.items()
        for n, data in stored
    ]
    ends = list(batch.ends.items())
    events += [
        {"message_id": message_id, "n": n, "data": data}
        for message_id, ending in ends
        for n, data in ending.last
    ]
    answers = [ending.end.answer for _, ending in ends if ending.end.answer is not None]
    async with db.write() as session:
        # The lock order of `chat.locks`: the conversations of the runs that end, then their
        # runs, messages and events. A deletion takes them in the same order.
        held = await hold_conversations(
            session, (e.end.conversation_id for _, e in ends if e.end.conversation_id)
        )
        if answers:
            await _save_answers(session, [a for a in answers if a.conversation_id in held])
        if events:
            await session.execute(insert(_EVENTS), events)
        if ends:
            await session.execute(_END_RUN, [_end_row(m, ending.end) for m, ending in ends])
        await notify(session, EVENTS_CHANNEL, batch.runs())


async def _save_answers(session: AsyncSession, answers: Sequence[Message]) -> None:
    """Inserted, their conversations' rows held by the caller (an answer whose conversation
    was deleted meanwhile is not among them); an answer that another process closed as
    interrupted meanwhile (it took this process for dead, `chat.liveness`) replaces that copy
    instead."""
    if not answers:
        return
    ids = [answer.id for answer in answers]
    copies = set(
        await session.scalars(
            select(Message.id).where(Message.id.in_(ids), Message.interrupted.is_(True))
        )
    )
    new = [_answer_row(answer) for answer in answers if answer.id not in copies]
    if new:
        await session.execute(insert(_MESSAGES), new)
    for answer in answers:
        if answer.id in copies:
            log.warning("chat answer closed as interrupted by another process, then finished")
            await session.execute(
                update(_MESSAGES)
                .where(_MESSAGES.c.id == answer.id)
                .values(
                    content=answer.content,
                    tool_calls=answer.tool_calls,
                    tool_results=answer.tool_results,
                    parts=answer.parts,
                    usage=answer.usage,
                    interrupted=False,
                )
            )
    # Sorted: two answers of one conversation ending together leave it the later's time.
    touched = sorted((answer.created_at, answer.conversation_id) for answer in answers)
    await session.execute(_TOUCH, [{"conversation": c, "now": when} for when, c in touched])


async def save_interrupted(session: AsyncSession, answer: Message) -> bool:
    """For a process that closes another's run (its process died), in the caller's
    transaction, the conversation's row held (`chat.locks`): the answer so far saved, its
    conversation touched. False when the conversation was deleted while the answer ran."""
    touched = await session.execute(
        _TOUCH, {"conversation": answer.conversation_id, "now": answer.created_at}
    )
    if not touched.rowcount:  # type: ignore[attr-defined]
        return False
    await session.execute(insert(_MESSAGES).values(_answer_row(answer)))
    return True


def _answer_row(answer: Message) -> dict[str, Any]:
    return {
        "id": answer.id,
        "conversation_id": answer.conversation_id,
        "role": answer.role,
        "content": answer.content,
        "tool_calls": answer.tool_calls,
        "tool_results": answer.tool_results,
        "parts": answer.parts,
        "usage": answer.usage,
        "created_at": answer.created_at,
        "interrupted": answer.interrupted,
    }


def _end_row(message_id: str, end: RunEnd) -> dict[str, Any]:
    return {
        "run": message_id,
        "status": end.status,
        "input_tokens": end.usage.input_tokens,
        "output_tokens": end.usage.output_tokens,
        "provider_calls": end.usage.provider_calls,
        "tool_calls": end.usage.tool_calls,
    }


# -- one run ---------------------------------------------------------------------------------


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
    ) -> None:
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
        self._stop = asyncio.Event()
        self._poked = asyncio.Event()

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
        self, status: str, last: Event | None = None, answer: Message | None = None
    ) -> None:
        """The run's end, stored after its events with its `last` event and its `answer`;
        `last` is sent once they are stored. Raises what the database raised, and then
        nothing of `last`, the answer or the end is stored or sent (the run may still `send`
        and `finish`). Nothing more once the run has ended."""
        if self._ended:
            return
        n = self._n + 1
        data = event_data(last) if last is not None else None
        stored = [(n, data)] if data is not None else []
        end = RunEnd(status, self.usage, answer, self.conversation_id)
        await self._writer.end(self.message_id, end, stored)
        self._ended = True
        if last is not None:
            self._n = n
            self._channel.send(last, self._id(n), data)

    def _id(self, n: int) -> str:
        return f"{self.message_id}:{n}"

    # The stop: no provider or tool call starts once it is asked.

    async def conversation_deleted(self) -> bool:
        """Whether the run's conversation was deleted while it ran."""
        async with self._db.read() as session:
            found = await session.scalar(
                select(ConversationRow.id).where(ConversationRow.id == self.conversation_id)
            )
        return found is None

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
        self._poked.set()

    def poke(self) -> None:
        """An approval of this run may have been answered: read it again."""
        self._poked.set()

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

    async def ask_approval(self, tool_call_id: str) -> None:
        """Store the call's pending approval. Before the event that asks for it is sent: an
        answer sent the moment that event arrives must find it."""
        async with self._db.write() as session:
            session.add(
                ChatApproval(message_id=self.message_id, tool_call_id=tool_call_id, status=PENDING)
            )

    async def approval(self, tool_call_id: str, timeout_s: float) -> str:
        """Wait for the user's answer to a call asked with `ask_approval`: APPROVED, DENIED,
        EXPIRED (no answer in time) or STOPPED (the message was stopped meanwhile).

        An answer given in this process, or notified (PostgreSQL), wakes the wait at once
        (`poke`). Nothing notifies an answer given in another process on SQLite, and a
        notification is lost while the LISTEN connection is down, so the answer is also read
        again every `Signals.poll_s`: late by that much at worst, never missed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        call = (
            ChatApproval.message_id == self.message_id,
            ChatApproval.tool_call_id == tool_call_id,
        )
        while True:
            self._poked.clear()  # before the read: a poke during it means read again
            async with self._db.read() as session:
                status = await session.scalar(select(ChatApproval.status).where(*call))
            if status is not None and status != PENDING:
                return status
            if self.stopped:
                return STOPPED
            remaining = deadline - loop.time()
            if remaining <= 0:
                async with self._db.write() as session:
                    expired = await session.execute(
                        update(ChatApproval)
                        .where(*call, ChatApproval.status == PENDING)
                        .values(status=EXPIRED)
                    )
                if expired.rowcount:  # type: ignore[attr-defined]
                    return EXPIRED
                continue  # answered just now
            with suppress(TimeoutError):
                await asyncio.wait_for(self._poked.wait(), min(remaining, self._signals.poll_s))


# -- what other requests and processes do to runs ----------------------------------------------


async def close_run(session: AsyncSession, message_id: str, final_data: str, status: str) -> bool:
    """For a process that closes another's run (its process died), in the caller's
    transaction: appends `final_data` after the last stored event and sets `status`, if the
    run is still marked running. True when it closed it; readers tailing the run receive the
    event (notified at the commit) and end."""
    closed = await session.execute(
        update(ChatRun)
        .where(ChatRun.message_id == message_id, ChatRun.status == RUNNING)
        .values(status=status)
    )
    if not closed.rowcount:  # type: ignore[attr-defined]
        return False
    last = await session.scalar(
        select(func.max(ChatEventRow.n)).where(ChatEventRow.message_id == message_id)
    )
    await session.execute(
        insert(_EVENTS).values(message_id=message_id, n=int(last or 0) + 1, data=final_data)
    )
    await notify(session, EVENTS_CHANNEL, [message_id])
    return True


async def run_owner_status(db: Database, message_id: str) -> tuple[str, str] | None:
    """(user id, status) of a run whose events are kept; None when there is none."""
    cutoff = utcnow() - KEPT_FOR
    async with db.read() as session:
        row = (
            await session.execute(
                select(ChatRun.user_id, ChatRun.status).where(
                    ChatRun.message_id == message_id, ChatRun.created_at >= cutoff
                )
            )
        ).first()
    return (row[0], row[1]) if row is not None else None


async def events_after(db: Database, message_id: str, after: int) -> list[StoredEvent]:
    async with db.read() as session:
        rows = await session.execute(
            select(ChatEventRow.n, ChatEventRow.data)
            .where(ChatEventRow.message_id == message_id, ChatEventRow.n > after)
            .order_by(ChatEventRow.n)
        )
        return [(n, data) for n, data in rows]


async def request_stop(db: Database, message_id: str, user_id: str) -> StopAnswer:
    """Set the run's stop flag, for its process wherever it runs."""
    async with db.write() as session:
        if await ask_stop(session, ChatRun.message_id == message_id, ChatRun.user_id == user_id):
            return StopAnswer.ASKED
        owner = await session.scalar(
            select(ChatRun.user_id).where(ChatRun.message_id == message_id)
        )
    return StopAnswer.NOT_RUNNING if owner == user_id else StopAnswer.NOT_FOUND


async def stops_asked(db: Database) -> list[str]:
    """The running runs a stop was asked for, of every process (polled on SQLite, where
    nothing notifies): the few rows of a partial index, however many runs there are."""
    async with db.read() as session:
        return list(await session.scalars(_STOPS_ASKED))


async def answer_approval(
    db: Database, message_id: str, tool_call_id: str, user_id: str, status: str
) -> Answer:
    """The user's answer to a pending approval: DONE, CONFLICT (already answered or timed
    out) or NOT_FOUND (no such call of one of the user's messages)."""
    owned = select(ChatRun.message_id).where(
        ChatRun.message_id == message_id, ChatRun.user_id == user_id
    )
    call = (ChatApproval.message_id.in_(owned), ChatApproval.tool_call_id == tool_call_id)
    async with db.write() as session:
        answered = await session.execute(
            update(ChatApproval).where(*call, ChatApproval.status == PENDING).values(status=status)
        )
        if answered.rowcount:  # type: ignore[attr-defined]
            await notify(session, APPROVAL_CHANNEL, [message_id])
            return Answer.DONE
        was = await session.scalar(select(ChatApproval.status).where(*call))
    return Answer.NOT_FOUND if was is None else Answer.CONFLICT


async def prune(db: Database, now: datetime | None = None) -> int:
    """Forget the events of runs older than 24 h (the runs stay: their usage counts for the
    month); the number of events removed."""
    cutoff = (now or utcnow()) - KEPT_FOR
    old = select(ChatRun.message_id).where(ChatRun.created_at < cutoff)
    async with db.write() as session:
        removed = await session.execute(
            delete(ChatEventRow).where(ChatEventRow.message_id.in_(old))
        )
        return int(removed.rowcount)  # type: ignore[attr-defined]
