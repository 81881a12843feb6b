"""Waiting readers of a message's events cost nothing of their own: a process wakes all of
them from one place (its writer, a notification, or on SQLite one poll for every watched
message), so a hundred readers waiting make no query each. On both databases."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event

from controlcenter.chat.events import content_delta, event_data
from controlcenter.chat.models import INTERRUPTED
from controlcenter.chat.resume import tail
from controlcenter.chat.run.start import start_turn
from controlcenter.chat.run.stored import close_run
from controlcenter.chat.run.writer import EventWriter
from controlcenter.chat.signals import Signals
from controlcenter.db import Database
from tests.conftest import RunningServer, UserFactory

READERS = 100
POLL = "max(chat_events.n)"  # the process's one look at how far the watched runs got
READER_READS = ("chat_events.data", "chat_runs.user_id")


@pytest.fixture
async def process(server: RunningServer) -> AsyncIterator[tuple[Database, Signals]]:
    """A database and signals of their own: what the readers' process holds."""
    db = Database(server.db.url)
    signals = Signals(db)
    yield db, signals
    await signals.aclose()
    await db.dispose()


async def _read(db: Database, signals: Signals, message_id: str, into: list[Any]) -> None:
    async for frame in tail(db, signals, message_id, 1):
        into.append(json.loads(frame.split(b"data: ", 1)[1]))


async def test_many_waiting_readers_make_no_query_of_their_own(
    process: tuple[Database, Signals], server: RunningServer, users: UserFactory
) -> None:
    db, signals = process
    user = await users.create()
    message_id = "msg_1_readers0001"
    await start_turn(
        server.db, user_id=user.id, conversation_id=None, message="x", answer_id=message_id
    )
    statements: list[str] = []

    def executed(*args: Any) -> None:
        statements.append(str(args[2]))

    def polls_only() -> bool:
        """No reader read on its own (what a reader reads: the events, the run's owner)."""
        return not [s for s in statements if any(read in s for read in READER_READS)]

    got: list[list[Any]] = [[] for _ in range(READERS)]
    event.listen(db.read_engine, "before_cursor_execute", executed)
    try:
        readers = [asyncio.create_task(_read(db, signals, message_id, into)) for into in got]
        # Each reader reads what is stored, is woken once by the process's first look (it
        # cannot know what the reader read) and waits; from then on only the poll reads.
        while True:
            statements.clear()
            await asyncio.sleep(5 * signals.poll_s if db.is_sqlite else 1.0)
            if polls_only():
                break
        statements.clear()
        await asyncio.sleep(10 * signals.poll_s if db.is_sqlite else 1.0)
    finally:
        event.remove(db.read_engine, "before_cursor_execute", executed)
    assert polls_only()
    polls = [s for s in statements if POLL in s]
    if db.is_sqlite:  # one query per interval for all of them, none per reader
        assert 1 <= len(polls) <= 11
    else:  # notifications wake them: nothing is read while nothing happens
        assert polls == []

    # Another process writes: every reader gets the event, then the end.
    other_db = Database(server.db.url)
    try:
        other = EventWriter(other_db, Signals(other_db))
        other.add(message_id, (2, event_data(content_delta("y"))))
        await other.close(10.0)
        final = event_data({"type": "error", "error": "The answer was interrupted"})
        await other_db.run_write(close_run, message_id, final, INTERRUPTED)
        await asyncio.wait_for(asyncio.gather(*readers), 30)
    finally:
        await other_db.dispose()
    expected = [
        {"type": "content_delta", "delta": "y"},
        {"type": "error", "error": "The answer was interrupted"},
    ]
    assert all(events == expected for events in got)


async def test_the_process_s_own_writer_wakes_its_readers(
    process: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = process
    user = await users.create()
    message_id = "msg_1_readers0002"
    await start_turn(db, user_id=user.id, conversation_id=None, message="x", answer_id=message_id)
    got: list[list[Any]] = [[] for _ in range(10)]
    readers = [asyncio.create_task(_read(db, signals, message_id, into)) for into in got]
    writer = EventWriter(db, signals)
    writer.add(message_id, (2, event_data({"type": "error", "error": "x"})))
    await asyncio.wait_for(asyncio.gather(*readers), 30)
    await writer.close(10.0)
    assert all(events == [{"type": "error", "error": "x"}] for events in got)
