"""The events of a process's runs, written behind the live stream.

One `EventWriter` per process gathers the events and ends of all its runs over a short window
(`WINDOW_S`) and writes them in one transaction, so a hundred chats streaming at once cost a
few transactions a second, not hundreds. A run's end is written at once (with whatever is
pending), or right after the write under way, with its last events and its answer, and
awaited until it is stored; the same write deletes the run's liveness row (`chat.liveness`),
except for a run interrupted at shutdown, whose row another process closes. Each write
notifies the readers in other processes on PostgreSQL (in the same transaction, delivered at
its commit); `chat.signals` listens. A run's other bookkeeping (the ledger's note of how a
tool's write ended) is handed to the writer too, and stored with the run's next events, its
conversation's row held first (`chat.locks`), rather than in a transaction of its own.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql import Executable

from controlcenter.chat.locks import hold_conversations
from controlcenter.chat.models import (
    ADD_EVENTS,
    INTERRUPTED,
    RUNNING,
    RUNNING_TABLE,
    RUNS_TABLE,
    STOPPED,
    ChatRun,
    Message,
)
from controlcenter.chat.run.answer import save_answers
from controlcenter.chat.signals import EVENTS_CHANNEL, Signals
from controlcenter.common.logs import get_logger
from controlcenter.db import Database
from controlcenter.db.notifications import notify

log = get_logger(__name__)


StoredEvent = tuple[int, str]  # (n, the event's JSON text)
# (the run's conversation id, a statement of the run's, its parameters)
Deferred = tuple[str, Executable, Mapping[str, Any]]
WINDOW_S = 0.05  # how long events wait to share a transaction; the live stream never waits
RETRY_MAX_S = 1.0  # the longest pause between attempts while the database refuses


# Built once; each runs for any number of rows (executemany, or an expanding IN list).
_DROP_RUNNING = delete(RUNNING_TABLE).where(
    RUNNING_TABLE.c.message_id.in_(bindparam("runs", expanding=True))
)
_END_RUN = (
    update(RUNS_TABLE)
    .where(RUNS_TABLE.c.message_id == bindparam("run"))
    .values(
        status=bindparam("status"),
        input_tokens=bindparam("input_tokens"),
        output_tokens=bindparam("output_tokens"),
        provider_calls=bindparam("provider_calls"),
        tool_calls=bindparam("tool_calls"),
    )
)


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


@dataclass(slots=True)
class _Ending:
    end: RunEnd
    last: list[StoredEvent]  # its last events, stored with the end or not at all
    # Stored instead of `last` when its answer's conversation is gone, if given.
    gone: list[StoredEvent] | None
    done: asyncio.Future[bool]  # whether `last` was stored (not `gone`)


@dataclass
class _Pending:
    events: dict[str, list[StoredEvent]] = field(default_factory=dict)
    writes: dict[str, list[Deferred]] = field(default_factory=dict)
    ends: dict[str, _Ending] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.events or self.writes or self.ends)

    def runs(self) -> list[str]:
        return list({**self.events, **self.writes, **self.ends})

    def of(self, message_id: str) -> _Pending:
        one = _Pending()
        if message_id in self.events:
            one.events[message_id] = self.events[message_id]
        if message_id in self.writes:
            one.writes[message_id] = self.writes[message_id]
        if message_id in self.ends:
            one.ends[message_id] = self.ends[message_id]
        return one

    def retried(self, message_ids: set[str] | None = None) -> _Pending:
        """The events and writes to try again (of `message_ids` only, when given); no end."""
        kept = _Pending()
        kept.events = {
            m: e for m, e in self.events.items() if message_ids is None or m in message_ids
        }
        kept.writes = {
            m: w for m, w in self.writes.items() if message_ids is None or m in message_ids
        }
        return kept

    def put_back(self, older: _Pending) -> None:
        """`older`'s events and writes, before this one's (they were pending first)."""
        for message_id, events in older.events.items():
            self.events[message_id] = events + self.events.get(message_id, [])
        for message_id, writes in older.writes.items():
            self.writes[message_id] = writes + self.writes.get(message_id, [])


class EventWriter:
    """The events and ends of every run of this process, written a window at a time; an end
    is written at once (with whatever is pending), or right after the write under way."""

    def __init__(self, db: Database, signals: Signals, window_s: float = WINDOW_S) -> None:
        self._db = db
        self._signals = signals
        self._window_s = window_s
        self._pending = _Pending()
        self._writing: _Pending | None = None  # the batch whose write is under way
        self._task: asyncio.Task[None] | None = None
        self._waking: asyncio.Future[None] | None = None  # the window's wait
        self._last_write = -math.inf  # when the last write began (the loop's clock)

    def add(self, message_id: str, event: StoredEvent) -> None:
        self._pending.events.setdefault(message_id, []).append(event)
        self._kick()

    def add_write(
        self,
        message_id: str,
        conversation_id: str,
        statement: Executable,
        params: Mapping[str, Any],
    ) -> None:
        """`statement` with `params`, a write of the run's own, stored in the transaction of
        the run's next events (at its end at the latest), after its conversation's row is
        held."""
        write = (conversation_id, statement, params)
        self._pending.writes.setdefault(message_id, []).append(write)
        self._kick()

    async def end(
        self,
        message_id: str,
        end: RunEnd,
        last: Sequence[StoredEvent] = (),
        gone: Sequence[StoredEvent] | None = None,
    ) -> bool:
        """The run's end after its pending events, with its `last` events and its answer:
        returns once stored. Raises what the database raised if they could not be, and then
        nothing of `last`, the answer or the end is stored (the pending events are kept).

        When the answer's conversation is found deleted in that write and `gone` is given,
        `gone` is stored instead of `last` and the run ends stopped (its deletion stopped
        it): returns False then, True otherwise."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        kept_gone = list(gone) if gone is not None else None
        self._pending.ends[message_id] = _Ending(end, list(last), kept_gone, done)
        self._kick()
        self._wake()
        return await done

    def write_soon(self) -> None:
        """A run is about to wait (for its provider): what is pending may be written now,
        while the process is busy with that run anyway, unless a write began less than a
        window ago (so that under load the writes stay a window apart)."""
        if asyncio.get_running_loop().time() - self._last_write >= self._window_s:
            self._wake()

    async def close(self, timeout_s: float) -> None:
        """At shutdown: what is pending, written within `timeout_s` if the database allows.

        Past it, the runs still pending are not stored (`runs` in the log line), and a write
        under way is left to the database (`under_way`: on SQLite a write that began runs to
        its end, on PostgreSQL it is rolled back); the ends of both are failed to their
        callers, who are not told more."""
        task = self._task
        if task is None:
            return
        self._wake()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout_s)
        except TimeoutError:
            task.cancel()
            writing, pending = self._writing or _Pending(), self._pending
            log.warning(
                "chat events not stored at shutdown",
                runs=len(pending.runs()),
                under_way=len(writing.runs()),
            )
            for ending in [*pending.ends.values(), *writing.ends.values()]:
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
            while self._pending:
                if not self._pending.ends or pause > self._window_s:
                    # After a refusal, the whole pause: the database is not hurried.
                    await self._pause(pause)
                self._last_write = asyncio.get_running_loop().time()
                batch, self._pending = self._pending, _Pending()
                self._writing = batch
                try:
                    failed = await self._write(batch)
                finally:
                    self._writing = None
                if failed:
                    failed = await _still_running(self._db, failed)
                self._pending.put_back(failed)  # tried again, before newer events
                pause = min(pause * 2, RETRY_MAX_S) if failed else self._window_s
        finally:
            if self._task is asyncio.current_task():  # not a later one, after a cancel
                self._task = None

    async def _write(self, batch: _Pending) -> _Pending:
        """One transaction for all; when it fails, each run alone, so that one run's bad
        write loses nothing of the others. The events and writes still to be stored."""
        try:
            gone = await _write_batch(self._db, batch)
        except Exception as exc:
            if len(batch.runs()) == 1:
                return self._failed(batch, exc)
            log.warning("chat events: batch refused, writing run by run", error=type(exc).__name__)
        else:
            self._stored(batch, gone)
            return _Pending()
        failed = _Pending()
        for message_id in batch.runs():
            one = batch.of(message_id)
            try:
                gone = await _write_batch(self._db, one)
            except Exception as exc:
                failed.put_back(self._failed(one, exc))
            else:
                self._stored(one, gone)
        return failed

    def _stored(self, batch: _Pending, gone: set[str]) -> None:
        """`gone`: the runs that ended with their `gone` events."""
        for message_id in batch.runs():
            self._signals.wake(message_id)
        for message_id, ending in batch.ends.items():
            if not ending.done.done():
                ending.done.set_result(message_id not in gone)

    def _failed(self, batch: _Pending, exc: Exception) -> _Pending:
        """A run's events and writes are kept to be tried again; its end, last events and
        answer are not, and its caller is told."""
        log.warning("chat events not stored yet", error=type(exc).__name__)
        for ending in batch.ends.values():
            _fail(ending.done, exc)
        return batch.retried()


async def _still_running(db: Database, failed: _Pending) -> _Pending:
    """`failed` without the runs that no longer run: deleted with their user, or closed as
    interrupted by a process that took this one for dead. Their events can never be stored
    (nor in order), and trying again would go on for the process's whole life."""
    try:
        running = await db.run_read(_running, failed.runs())
    except Exception:
        return failed  # the database is down: everything is tried again
    if len(running) < len(failed.runs()):
        log.warning(
            "chat events dropped: their run no longer runs",
            runs=len(failed.runs()) - len(running),
        )
    return failed.retried(running)


def _running(session: Session, message_ids: list[str]) -> set[str]:
    """Those of the runs still marked running."""
    found = select(ChatRun.message_id).where(
        ChatRun.message_id.in_(message_ids), ChatRun.status == RUNNING
    )
    return set(session.scalars(found))


def _fail(future: asyncio.Future[bool], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


async def _write_batch(db: Database, batch: _Pending) -> set[str]:
    """The answers (each touching its conversation), the events and the runs' ends of
    `batch` in one transaction, with the liveness rows of the runs that end (not of one
    interrupted at shutdown: another process closes it); readers in other processes notified
    of each run. The runs that ended with their `gone` events."""
    events = [
        {"message_id": message_id, "n": n, "data": data}
        for message_id, stored in batch.events.items()
        for n, data in stored
    ]
    writes = [write for stored in batch.writes.values() for write in stored]
    return await db.run_write(_store, events, writes, list(batch.ends.items()), batch.runs())


def _store(
    session: Session,
    events: list[dict[str, Any]],
    writes: list[Deferred],
    ends: list[tuple[str, _Ending]],
    runs: list[str],
) -> set[str]:
    """`_write_batch`'s transaction: `runs` are the message ids of every run in it."""
    # The lock order of `chat.locks`: the conversations of the runs that end or write,
    # then their runs, messages and events. A deletion takes them in the same order.
    ending = [e.end.conversation_id for _, e in ends if e.end.conversation_id]
    held = hold_conversations(session, [*ending, *(c for c, _, _ in writes)])
    answers = [e.end.answer for _, e in ends if e.end.answer is not None]
    if answers:
        save_answers(session, [a for a in answers if a.conversation_id in held])
    # An answer with no conversation left to be saved in: its deletion stopped the run.
    gone = {
        m
        for m, e in ends
        if e.gone is not None
        and e.end.answer is not None
        and e.end.answer.conversation_id not in held
    }
    events = events + [
        {"message_id": m, "n": n, "data": data}
        for m, e in ends
        for n, data in (e.gone if m in gone and e.gone is not None else e.last)
    ]
    if events:
        session.execute(ADD_EVENTS, events)
    for conversation_id, statement, params in writes:
        if conversation_id in held:  # its rows went with a deleted conversation
            session.execute(statement, params)
    if ends:
        rows = [_end_row(m, STOPPED if m in gone else e.end.status, e.end) for m, e in ends]
        session.execute(_END_RUN, rows)
    ended = [m for m, e in ends if e.end.status != INTERRUPTED]
    if ended:
        session.execute(_DROP_RUNNING, {"runs": ended})
    notify(session, EVENTS_CHANNEL, runs)
    return gone


def _end_row(message_id: str, status: str, end: RunEnd) -> dict[str, Any]:
    return {
        "run": message_id,
        "status": status,
        "input_tokens": end.usage.input_tokens,
        "output_tokens": end.usage.output_tokens,
        "provider_calls": end.usage.provider_calls,
        "tool_calls": end.usage.tool_calls,
    }
