"""The runs' events on their way to the database, and each run's stop flag.

Events are numbered as they are sent (message_start is 1) and written in the background: the
live stream never waits for the database. One `EventWriter` per process gathers the events and
the ends of all its runs over a short window (`WINDOW_S`) and writes them in one transaction,
so that a hundred chats streaming at once cost a few transactions a second, not hundreds. The
first event is written with the run's row before it is sent (`begin`), so that a client holding
a message id can always find the message; a run's end is awaited until it is stored.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TypeVar

from controlcenter.chat import run_store
from controlcenter.chat.models import Message
from controlcenter.chat.run_store import RunEnd, RunUsage, StoredEvent
from controlcenter.chat.signals import Signals
from controlcenter.common.logs import get_logger
from controlcenter.db import Database
from controlcenter.db.group_commit import GroupCommit

log = get_logger(__name__)

T = TypeVar("T")
WINDOW_S = 0.05  # how long events wait to share a transaction; the live stream never waits
RETRY_MAX_S = 1.0  # the longest pause between attempts while the database refuses


@dataclass(slots=True)
class _Closing:
    """A run's last write (`EventWriter.end_with`)."""

    message_id: str
    last: list[StoredEvent]
    end: RunEnd
    answer: Message
    pending: list[StoredEvent] | None = None  # its events taken from the window, once


class EventWriter:
    """The events and ends of every run of this process, written a window at a time."""

    def __init__(self, db: Database, signals: Signals, window_s: float = WINDOW_S) -> None:
        self._db = db
        self._signals = signals
        self._window_s = window_s
        self._events: dict[str, list[StoredEvent]] = {}
        self._ends: dict[str, RunEnd] = {}
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._task: asyncio.Task[None] | None = None
        # The runs whose events the batch being written holds, and that batch's end: a run's
        # last write (`end_with`) waits for it, so that its events commit in order.
        self._writing: set[str] = set()
        self._written: asyncio.Future[None] | None = None
        self._waking: asyncio.Future[None] | None = None  # the window's wait, `write_soon`'s
        self._last_write = -math.inf  # when the last window's write began (the loop's clock)
        # The runs' last writes (`end_with`), in shared transactions.
        self._closings = GroupCommit(
            db, self._close, "chat-run-ends", before=self._take_pending, driver=True
        )

    def add(self, message_id: str, event: StoredEvent) -> None:
        self._events.setdefault(message_id, []).append(event)
        self._kick()

    async def end(self, message_id: str, end: RunEnd) -> None:
        """The run's end, after its remaining events; returns once it is stored (raises what
        the database raised if it could not be)."""
        self._ends[message_id] = end
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(message_id, []).append(done)
        self._kick()
        await done

    async def end_with(
        self,
        message_id: str,
        last: list[StoredEvent],
        end: RunEnd,
        answer: Message,
    ) -> None:
        """The run's pending events, its `last` events and its end, written with its `answer`
        (the assistant message, `run_store.write_ends`): a chat's last write, one statement
        on PostgreSQL. Returns once they are stored; raises what the database raised (the
        driver's own error), and then nothing of `answer`, `last` or `end` is stored and the
        pending events are this writer's again.

        The ends of many runs share transactions (`db.group_commit`): a thousand answers
        ending together cost tens of transactions, not a thousand taking turns at the
        database; a lone answer is written at once."""
        closing = _Closing(message_id, last, end, answer)
        try:
            await self._closings.submit(closing)
        except Exception:  # refused: not written (a cancelled caller's write may still be)
            if closing.pending:
                self._events[message_id] = closing.pending + self._events.get(message_id, [])
                self._kick()
            raise
        self._signals.wake(message_id)

    async def _take_pending(self, batch: Sequence[_Closing]) -> None:
        """Before the runs' last transaction: their events in a batch being written commit
        first, and the events still waiting for the window go with the last ones."""
        runs = {closing.message_id for closing in batch}
        while runs & self._writing and self._written is not None:
            await asyncio.shield(self._written)
        for closing in batch:
            if closing.pending is None:  # taken once: a batch that failed is tried one by one
                closing.pending = self._events.pop(closing.message_id, [])
        if self._task is not None and not (self._events or self._ends or self._writing):
            # It only waits out its window, for these events: they go with this write.
            self._task.cancel()
            self._task = None

    async def _close(self, driver: object, batch: Sequence[_Closing]) -> list[None]:
        answers = [closing.answer for closing in batch]
        events = {c.message_id: (c.pending or []) + c.last for c in batch}
        ends = {c.message_id: c.end for c in batch}
        await run_store.write_ends(self._db, driver, answers, events, ends)
        return [None] * len(batch)

    def _kick(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    def write_soon(self) -> None:
        """A run is about to wait (for its provider): what is pending may be written now,
        while the process is busy with that run anyway, unless a write began less than a
        window ago (so that under load the writes stay a window apart). A lone chat's events
        were written after a wake-up of their own, 50 ms after each burst, with cold caches:
        ~0.4 ms of CPU each, a fifth of its storage."""
        waking = self._waking
        loop = asyncio.get_running_loop()
        if waking is not None and loop.time() - self._last_write >= self._window_s:
            _done(waking)

    async def _pause(self, pause_s: float, early: bool) -> None:
        """`pause_s`, or less when `early` and `write_soon` is called meanwhile."""
        loop = asyncio.get_running_loop()
        waking: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(pause_s, _done, waking)
        self._waking = waking if early else None
        try:
            await waking
        finally:
            timer.cancel()
            self._waking = None

    async def _run(self) -> None:
        pause = self._window_s
        try:
            while self._events or self._ends:
                # After a refusal, the whole pause: the database is not hurried.
                await self._pause(pause, early=pause == self._window_s)
                self._last_write = asyncio.get_running_loop().time()
                events, self._events = self._events, {}
                ends, self._ends = self._ends, {}
                self._writing = {*events, *ends}
                self._written = asyncio.get_running_loop().create_future()
                try:
                    failed = await self._write(events, ends)
                    # Events that could not be stored are tried again, before any sent since;
                    # a run whose end failed has its caller told, and is not retried.
                    for message_id, kept in failed.items():
                        self._events[message_id] = kept + self._events.get(message_id, [])
                finally:
                    self._writing = set()
                    self._written.set_result(None)
                pause = min(pause * 2, RETRY_MAX_S) if failed else self._window_s
        finally:
            if self._task is asyncio.current_task():  # not a later one, after a cancel
                self._task = None

    async def _write(
        self, events: dict[str, list[StoredEvent]], ends: dict[str, RunEnd]
    ) -> dict[str, list[StoredEvent]]:
        """One transaction for all; when it fails, each run alone, so that one run's bad
        write loses nothing of the others. The events of runs still failing."""
        try:
            await run_store.write_batch(self._db, events, ends)
        except Exception as exc:
            if len(set(events) | set(ends)) == 1:
                return self._failed(events, ends, exc)
            log.warning("chat events: batch refused, writing run by run", error=type(exc).__name__)
        else:
            self._stored(events, ends)
            return {}
        failed: dict[str, list[StoredEvent]] = {}
        for message_id in {**events, **ends}:
            own = {message_id: events[message_id]} if message_id in events else {}
            end = {message_id: ends[message_id]} if message_id in ends else {}
            try:
                await run_store.write_batch(self._db, own, end)
            except Exception as exc:
                failed.update(self._failed(own, end, exc))
            else:
                self._stored(own, end)
        return failed

    def _stored(self, events: dict[str, list[StoredEvent]], ends: dict[str, RunEnd]) -> None:
        for message_id in {**events, **ends}:
            self._signals.wake(message_id)
            for waiter in self._waiters.pop(message_id, []) if message_id in ends else []:
                if not waiter.done():
                    waiter.set_result(None)

    def _failed(
        self, events: dict[str, list[StoredEvent]], ends: dict[str, RunEnd], exc: Exception
    ) -> dict[str, list[StoredEvent]]:
        log.warning("chat events not stored yet", error=type(exc).__name__)
        for message_id in ends:
            for waiter in self._waiters.pop(message_id, []):
                if not waiter.done():
                    waiter.set_exception(exc)
        return {m: kept for m, kept in events.items() if m not in ends}

    async def close(self, timeout_s: float) -> None:
        """At shutdown: what is pending, written within `timeout_s` if the database allows."""
        task = self._task
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout_s)
        except TimeoutError:
            task.cancel()
            log.warning("chat events not stored at shutdown", runs=len(self._events))
            for waiters in self._waiters.values():
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(TimeoutError("chat events not stored at shutdown"))


def _done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class RunRecord:
    def __init__(
        self, db: Database, signals: Signals, writer: EventWriter, message_id: str
    ) -> None:
        self.message_id = message_id
        self._db = db
        self._signals = signals
        self._writer = writer
        self._n = 0
        self._ended = False
        self._stop = asyncio.Event()
        self._poked = asyncio.Event()
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

    def began(self) -> int:
        """The run's row and first event are stored (`run_store.create_run`, or with the
        user's message): the number of that event."""
        self._n = 1
        self._signals.wake(self.message_id)
        return 1

    def waiting(self) -> None:
        """The run is about to call its provider: its events may be written now
        (`EventWriter.write_soon`), on the loop's next turn, behind the call's first step
        (the request is sent before the write, not after it)."""
        asyncio.get_running_loop().call_soon(self._writer.write_soon)

    def record(self, data: str) -> int:
        self._n += 1
        self._writer.add(self.message_id, (self._n, data))
        return self._n

    async def finish(self, status: str) -> None:
        """The run's end, stored after its events; returns once it is (at once when
        `finish_with` stored it)."""
        if self._ended:
            return
        await self._writer.end(self.message_id, RunEnd(status, self.usage))
        self._ended = True

    async def finish_with(self, data: str, status: str, answer: Message) -> int:
        """The run's last event (`message_complete`) and its end, stored with the events still
        pending and the run's `answer` (`EventWriter.end_with`); the event's number. When the
        database refuses, nothing is numbered or stored and the caller may still `record` and
        `finish`."""
        n = self._n + 1
        end = RunEnd(status, self.usage)
        await self._writer.end_with(self.message_id, [(n, data)], end, answer)
        self._n = n
        self._ended = True
        return n

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

    async def ask_approval(self, tool_call_id: str) -> None:
        """Store the call's pending approval. Before the event that asks for it is sent: an
        answer sent the moment that event arrives must find it (it was a 404 otherwise)."""
        await run_store.ask_approval(self._db, self.message_id, tool_call_id)

    async def approval(self, tool_call_id: str, timeout_s: float) -> str:
        """Wait for the user's answer to a call asked with `ask_approval`: APPROVED, DENIED,
        EXPIRED (no answer in time) or STOPPED (the message was stopped meanwhile).

        An answer given in this process, or notified (PostgreSQL), wakes the wait at once
        (`poke`). Nothing notifies an answer given in another process on SQLite, and a
        notification is lost while the LISTEN connection is down, so the answer is also read
        again every `Signals.poll_s`: late by that much at worst, never missed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            self._poked.clear()  # before the read: a poke during it means read again
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
                await asyncio.wait_for(self._poked.wait(), min(remaining, self._signals.poll_s))

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
