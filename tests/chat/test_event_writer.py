"""The process's event writer and a run's end (chat.store): the events and ends of many runs
share transactions, each run's events land in order with none lost, one run's failing write
loses nothing of the others, a run's end is one write with its answer, and what is pending at
shutdown is written. On both databases."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import pytest
from sqlalchemy import delete, event, select, text
from sqlalchemy.exc import IntegrityError
from structlog.testing import capture_logs

from controlcenter.chat.channel import EventChannel
from controlcenter.chat.events import Event, content_delta, event_data
from controlcenter.chat.fold import fold
from controlcenter.chat.locks import hold_conversations
from controlcenter.chat.models import (
    DONE,
    FAILED,
    RUNNING,
    STOPPED,
    ChatRun,
    ConversationRow,
    Message,
)
from controlcenter.chat.run.answer import assistant_message
from controlcenter.chat.run.record import RunRecord
from controlcenter.chat.run.start import start_turn
from controlcenter.chat.run.stored import events_after, run_owner_status
from controlcenter.chat.run.writer import EventWriter, RunEnd, RunUsage
from controlcenter.chat.signals import Signals
from controlcenter.db import Database, utcnow
from tests.conftest import UserFactory
from tests.dbtools import reading, writing

RUNS = 40
EVENTS = 25


@contextmanager
def counted_commits(db: Database) -> Iterator[list[object]]:
    """The transactions committed on `db` meanwhile (SQLAlchemy's `commit` event)."""
    commits: list[object] = []

    def committed(connection: object) -> None:
        commits.append(connection)

    engine = db.write_engine
    event.listen(engine, "commit", committed)
    try:
        yield commits
    finally:
        event.remove(engine, "commit", committed)


@pytest.fixture
async def parts(database_url: str) -> AsyncIterator[tuple[Database, Signals]]:
    db = Database(database_url)
    signals = Signals(db)
    try:
        yield db, signals
    finally:
        await signals.aclose()
        await db.dispose()


async def _started(
    db: Database,
    signals: Signals,
    writer: EventWriter,
    user_id: str,
    tag: str,
    count: int,
    channel: EventChannel | None = None,
) -> list[RunRecord]:
    """`count` runs, each of a conversation of its own, `message_start` stored and sent."""
    runs = []
    for i in range(count):
        message_id = f"msg_1_{tag}{i:05d}"
        started = await start_turn(
            db, user_id=user_id, conversation_id=None, message="Hello", answer_id=message_id
        )
        assert started is not None
        sending = channel or EventChannel()
        run = RunRecord(
            db, signals, writer, message_id, started, sending, signals.enlist(message_id)
        )
        run.begin()
        runs.append(run)
    return runs


def _delta(text: str) -> Event:
    return content_delta(text)


async def _numbers(db: Database, message_id: str) -> list[int]:
    return [n for n, _ in await events_after(db, message_id, 0)]


async def _stream(run: RunRecord, events: int) -> None:
    for i in range(events):
        run.send(_delta(f"{run.message_id} part {i}"))
        await asyncio.sleep(0.002)  # a provider's pace: bursts of a few events per window
    run.count_provider_call(10, 5)
    await run.finish(DONE)


def _answer(
    run: RunRecord, content: str = "The answer", conversation: str | None = None
) -> Message:
    call = {"id": "t1", "name": "echo_text", "arguments": {"text": "x"}}
    result = {"toolCallId": "t1", "success": True, "result": "x"}
    answer = fold(
        [
            {"type": "content_delta", "delta": content},
            {"type": "tool_call_start", "toolCall": call},
            {"type": "tool_result", "toolResult": result},
        ]
    )
    usage = {"inputTokens": 3, "outputTokens": 4, "providerCalls": 1}
    return assistant_message(
        conversation or run.conversation_id, run.message_id, answer, usage=usage
    )


async def _stored_answer(db: Database, message_id: str) -> Message | None:
    async with reading(db) as session:
        return await session.scalar(select(Message).where(Message.id == message_id))


async def _updated_at(db: Database, conversation_id: str) -> datetime:
    async with reading(db) as session:
        conversation = await session.get(ConversationRow, conversation_id)
        assert conversation is not None
        return conversation.updated_at


async def test_many_runs_share_transactions_and_keep_every_event_in_order(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals)
    runs = await _started(db, signals, writer, user.id, "many", RUNS)
    with counted_commits(db) as commits:
        await asyncio.gather(*(_stream(run, EVENTS) for run in runs))
    for run in runs:
        stored = await events_after(db, run.message_id, 0)
        assert [n for n, _ in stored] == list(range(1, EVENTS + 2))
        assert stored[-1][1] == event_data(_delta(f"{run.message_id} part {EVENTS - 1}"))
    async with reading(db) as session:
        ended = (
            await session.execute(
                select(ChatRun.status, ChatRun.input_tokens, ChatRun.provider_calls).where(
                    ChatRun.message_id.in_([run.message_id for run in runs])
                )
            )
        ).all()
    assert sorted(ended) == [(DONE, 10, 1)] * RUNS
    # 1,000 events and 40 ends: one transaction each would be 1,040; by windows, a few dozen.
    assert 0 < len(commits) < (RUNS * (EVENTS + 1)) / 10, len(commits)


async def test_a_run_whose_write_fails_loses_nothing_of_the_others(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=0.2)  # everything below shares one window
    good, bad = await _started(db, signals, writer, user.id, "fail", 2)
    good.send(_delta("kept"))
    # An event number already stored: the database refuses the row, and with it the batch.
    writer.add(bad.message_id, (1, event_data(_delta("duplicate"))))
    results = await asyncio.gather(
        good.finish(DONE),
        writer.end(bad.message_id, RunEnd(DONE, RunUsage())),
        return_exceptions=True,
    )
    assert results[0] is None
    assert isinstance(results[1], IntegrityError)
    assert await _numbers(db, good.message_id) == [1, 2]
    assert await run_owner_status(db, good.message_id) == (user.id, DONE)
    # The failed run's end was not stored, and its caller was told so.
    assert await run_owner_status(db, bad.message_id) == (user.id, RUNNING)
    await writer.close(0.01)  # the refused event is tried again meanwhile, and still refused


async def test_the_events_of_a_run_deleted_with_its_user_are_dropped(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """A run's row deleted while it runs (its user deleted): its events can never be stored,
    so they are dropped after the refusal instead of being tried again for the process's
    whole life; another run's events are stored."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=0.01)
    gone, kept = await _started(db, signals, writer, user.id, "gone", 2)
    async with writing(db) as session:
        await session.execute(delete(ChatRun).where(ChatRun.message_id == gone.message_id))
    with capture_logs() as logs:
        gone.send(_delta("nowhere to go"))
        kept.send(_delta("kept"))
        results = await asyncio.gather(kept.finish(DONE), gone.finish(DONE), return_exceptions=True)
        await writer.close(30.0)  # returns as soon as nothing is pending
    assert results[0] is None
    assert isinstance(results[1], IntegrityError)
    assert await _numbers(db, kept.message_id) == [1, 2]
    events = [entry["event"] for entry in logs]
    assert "chat events dropped: their run no longer runs" in events
    assert "chat events not stored at shutdown" not in events


async def test_pending_events_are_written_at_shutdown(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=3600.0)  # the window alone writes nothing here
    (run,) = await _started(db, signals, writer, user.id, "close", 1)
    run.send(_delta("last words"))
    assert await _numbers(db, run.message_id) == [1]
    await writer.close(10.0)
    assert await _numbers(db, run.message_id) == [1, 2]


async def test_an_end_whose_write_is_under_way_at_shutdown_is_failed_not_left_waiting(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """The database holds the end's write longer than the shutdown allows: the run waiting
    for its end is told (TimeoutError) instead of waiting for ever, and the log line counts
    its write as under way, not as a run left unstored."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=3600.0)
    (run,) = await _started(db, signals, writer, user.id, "slow", 1)
    # Another transaction holds the conversation's row (on SQLite: the database's write lock).
    async with writing(db) as session:
        held = select(ConversationRow.id).where(ConversationRow.id == run.conversation_id)
        await session.execute(held.with_for_update())
        with capture_logs() as logs:
            ending = asyncio.ensure_future(run.finish(DONE, _delta("last"), _answer(run)))
            for _ in range(5):  # the end starts the writer's task, which begins the write
                await asyncio.sleep(0)
            await writer.close(0.01)
            with pytest.raises(TimeoutError):
                await ending
    (line,) = [entry for entry in logs if entry["event"] == "chat events not stored at shutdown"]
    assert (line["runs"], line["under_way"]) == (0, 1)


async def test_readers_are_woken_once_the_events_are_stored(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals)
    (run,) = await _started(db, signals, writer, user.id, "wake", 1)
    with signals.watch(run.message_id) as woken:
        woken.clear()
        run.send(_delta("news"))
        await woken.wait()
        assert await _numbers(db, run.message_id) == [1, 2]
    await run.finish(DONE)


async def test_the_answer_the_last_events_and_the_end_are_one_write(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """A chat's last write: the events still waiting for the window, the last event, the
    run's end and the assistant message (touching its conversation), in one transaction;
    readers woken; the last event sent once stored."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=3600.0)  # the window alone writes nothing here
    channel = EventChannel(ids=True)
    (run,) = await _started(db, signals, writer, user.id, "last", 1, channel)
    run.send(_delta("pending"))
    last = _delta("the last one")
    answer = _answer(run)
    with counted_commits(db) as commits, signals.watch(run.message_id) as woken:
        woken.clear()
        await run.finish(DONE, last, answer)
        assert woken.is_set()
    assert len(commits) == 1
    stored = await events_after(db, run.message_id, 0)
    assert [n for n, _ in stored] == [1, 2, 3] and stored[-1][1] == event_data(last)
    channel.close()
    frames = [frame async for frame in channel.frames()]
    assert frames[-1].startswith(f"id: {run.message_id}:3\n".encode())
    assert await run_owner_status(db, run.message_id) == (user.id, DONE)
    saved = await _stored_answer(db, run.message_id)
    assert saved is not None
    assert (saved.role, saved.content, saved.interrupted) == ("assistant", "The answer", False)
    assert (saved.tool_calls, saved.tool_results, saved.usage) == (
        answer.tool_calls,
        answer.tool_results,
        answer.usage,
    )
    assert saved.created_at == answer.created_at
    assert await _updated_at(db, run.conversation_id) == answer.created_at
    await run.finish(FAILED)  # already ended: nothing more is written
    assert await run_owner_status(db, run.message_id) == (user.id, DONE)


async def test_answers_of_one_conversation_ending_together_leave_it_the_later_s_time(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals)
    first, second = await _started(db, signals, writer, user.id, "same", 2)
    conversation = first.conversation_id
    answers = [
        _answer(first, conversation=conversation),
        _answer(second, conversation=conversation),
    ]
    answers[0].created_at += timedelta(seconds=1)  # the later one, first in the write
    await asyncio.gather(
        first.finish(DONE, None, answers[0]), second.finish(DONE, None, answers[1])
    )
    assert await _updated_at(db, conversation) == answers[0].created_at


async def test_a_refused_answer_loses_nothing_and_the_run_still_ends(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """The database refuses the answer (its id is taken): nothing of the last write is stored,
    the pending events are kept, and the run still sends and ends."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=0.1)
    (run,) = await _started(db, signals, writer, user.id, "refused", 1)
    async with writing(db) as session:
        session.add(_answer(run, "taken"))
    run.send(_delta("pending"))
    last = _delta("last")
    with pytest.raises(IntegrityError):
        await run.finish(DONE, last, _answer(run))
    assert await run_owner_status(db, run.message_id) == (user.id, RUNNING)
    stored_answer = await _stored_answer(db, run.message_id)
    assert stored_answer is not None and stored_answer.content == "taken"
    # The last event is numbered after the pending one, with no gap.
    run.send(last)
    await run.finish(DONE)
    stored = await events_after(db, run.message_id, 0)
    assert [n for n, _ in stored] == [1, 2, 3] and stored[-1][1] == event_data(last)
    assert await run_owner_status(db, run.message_id) == (user.id, DONE)


async def test_an_answer_whose_conversation_was_deleted_is_not_saved_and_the_run_ends(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """Deleted while the answer ran: nothing refuses the run's end (no foreign key error);
    its events and its end are stored, the answer is not."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=0.1)
    (run,) = await _started(db, signals, writer, user.id, "deleted", 1)
    async with writing(db) as session:
        await session.execute(
            delete(ConversationRow).where(ConversationRow.id == run.conversation_id)
        )
    run.send(_delta("pending"))
    await run.finish(DONE, _delta("last"), _answer(run))
    assert await _stored_answer(db, run.message_id) is None
    assert [n for n, _ in await events_after(db, run.message_id, 0)] == [1, 2, 3]
    assert await run_owner_status(db, run.message_id) == (user.id, DONE)


class _Kept(EventChannel):
    """A channel that keeps the events sent to it."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[Event] = []

    def note(self, event: Event) -> None:
        self.sent.append(event)


async def test_a_completed_answer_whose_conversation_is_gone_ends_with_the_deletion_error(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """The conversation is deleted before the run heard of its stop: the write that would save
    the answer finds no conversation, and stores and sends the error that says so instead of
    `message_complete`; the run ends stopped."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=0.1)
    channel = _Kept()
    (run,) = await _started(db, signals, writer, user.id, "gone", 1, channel)
    run.send(_delta("The answer"))
    async with writing(db) as session:
        await session.execute(
            delete(ConversationRow).where(ConversationRow.id == run.conversation_id)
        )
    assert not run.stopped
    await run.complete()
    deleted = {"type": "error", "error": "The conversation was deleted"}
    assert channel.sent[-1] == deleted
    stored = await events_after(db, run.message_id, 0)
    assert [n for n, _ in stored] == [1, 2, 3] and stored[-1][1] == event_data(deleted)
    assert await _stored_answer(db, run.message_id) is None
    assert await run_owner_status(db, run.message_id) == (user.id, STOPPED)


async def test_a_completed_answer_is_saved_and_ends_with_message_complete(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=0.1)
    channel = _Kept()
    (run,) = await _started(db, signals, writer, user.id, "kept", 1, channel)
    run.send(_delta("The answer"))
    await run.complete()
    assert channel.sent[-1]["type"] == "message_complete"
    saved = await _stored_answer(db, run.message_id)
    assert saved is not None and saved.content == "The answer"
    assert await run_owner_status(db, run.message_id) == (user.id, DONE)


async def test_nothing_of_the_last_write_is_stored_when_the_answer_s_id_is_taken(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """Only an interrupted copy gives way: an id taken by a finished answer refuses the whole
    last write."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=3600.0)
    (run,) = await _started(db, signals, writer, user.id, "atomic", 1)
    async with writing(db) as session:
        session.add(_answer(run, "the first"))
    touched = await _updated_at(db, run.conversation_id)
    with pytest.raises(IntegrityError):
        await run.finish(DONE, _delta("the last one"), _answer(run, "a second answer"))
    assert await _numbers(db, run.message_id) == [1]
    assert await run_owner_status(db, run.message_id) == (user.id, RUNNING)
    saved = await _stored_answer(db, run.message_id)
    assert saved is not None and saved.content == "the first"
    assert await _updated_at(db, run.conversation_id) == touched


async def test_the_real_end_replaces_an_interrupted_copy(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """Another process took this one for dead and closed the answer as interrupted: the
    answer's own end replaces that copy, in the same write."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals)
    (run,) = await _started(db, signals, writer, user.id, "copy", 1)
    async with writing(db) as session:  # what another process's close_stale saves
        session.add(
            Message(
                id=run.message_id,
                conversation_id=run.conversation_id,
                role="assistant",
                content="Half",
                interrupted=True,
                created_at=utcnow(),
            )
        )
    answer = _answer(run, "The whole answer")
    await run.finish(DONE, _delta("last"), answer)
    async with reading(db) as session:
        rows = (await session.scalars(select(Message).where(Message.id == run.message_id))).all()
    assert len(rows) == 1
    stored = rows[0]
    assert (stored.content, stored.interrupted) == ("The whole answer", False)
    assert (stored.tool_calls, stored.tool_results) == (answer.tool_calls, answer.tool_results)
    assert stored.usage == answer.usage
    assert await _numbers(db, run.message_id) == [1, 2]


@pytest.mark.postgresql_only
async def test_a_connection_the_server_dropped_is_replaced_and_nothing_is_lost(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """PostgreSQL closes a connection of the writer (a restart, an administrator's
    `pg_terminate_backend`): the batch that meets it is written again on a new connection,
    every event stored once and in order."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=0.01)
    (run,) = await _started(db, signals, writer, user.id, "dropped", 1)
    await _written(signals, run, "before")
    # The pooled connection the writer used (reads and writes share the pool on PostgreSQL).
    pid = await db.run_read(lambda session: session.scalar(text("SELECT pg_backend_pid()")))
    other = Database(db.url)  # another process's connection
    try:
        async with writing(other) as session:
            ended = await session.scalar(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        await other.dispose()
    assert ended is True
    await _written(signals, run, "after")
    await run.finish(DONE)
    stored = await events_after(db, run.message_id, 0)
    assert [n for n, _ in stored] == [1, 2, 3]
    assert stored[-1][1] == event_data(_delta("after"))
    assert await run_owner_status(db, run.message_id) == (user.id, DONE)


async def _written(signals: Signals, run: RunRecord, delta: str) -> None:
    """One event sent, once the writer has stored it (readers are woken then)."""
    with signals.watch(run.message_id) as woken:
        woken.clear()
        run.send(_delta(delta))
        await woken.wait()


async def test_answers_ending_while_one_is_written_share_the_next_transaction(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """The first end is written at once; those that end while it is under way wait for it
    and go together in the next transaction, each with its own events, end and answer.

    Another connection holds the first run's conversation (its row, and on SQLite the
    database's write lock), so the first write waits, under way, until it lets go."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=3600.0)  # the window alone writes nothing
    first, *others = await _started(db, signals, writer, user.id, "group", 20)
    for run in (first, *others):
        run.send(_delta(f"{run.message_id} pending"))
    entered = asyncio.Event()
    loop = asyncio.get_running_loop()

    def executed(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        # A write's first statement: SQLite's `BEGIN IMMEDIATE`, PostgreSQL's lock of the
        # conversations (`chat.locks`); either waits for the other connection. On SQLite in
        # the thread of the writes.
        if "BEGIN IMMEDIATE" in statement or "FOR NO KEY UPDATE" in statement:
            loop.call_soon_threadsafe(entered.set)

    other = Database(db.url)
    last = _delta("last")
    event.listen(db.write_engine, "before_cursor_execute", executed)
    try:
        with counted_commits(db) as commits:
            async with writing(other) as holding:
                await holding.run_sync(hold_conversations, [first.conversation_id])
                ending = [asyncio.create_task(first.finish(DONE, last, _answer(first)))]
                await entered.wait()
                ending += [
                    asyncio.create_task(run.finish(DONE, last, _answer(run))) for run in others
                ]
                for _ in range(10):  # the loop's turns: they wait for the write under way
                    await asyncio.sleep(0)
                assert not any(task.done() for task in ending)
            await asyncio.gather(*ending)
    finally:
        event.remove(db.write_engine, "before_cursor_execute", executed)
        await other.dispose()
    assert len(commits) == 2
    for run in (first, *others):
        stored = await events_after(db, run.message_id, 0)
        assert [n for n, _ in stored] == [1, 2, 3] and stored[-1][1] == event_data(last)
        assert await run_owner_status(db, run.message_id) == (user.id, DONE)
        saved = await _stored_answer(db, run.message_id)
        assert saved is not None and saved.content == "The answer"


async def test_an_answer_refused_in_a_shared_transaction_fails_alone(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=0.1)
    runs = await _started(db, signals, writer, user.id, "alone", 5)
    bad = runs[2]
    async with writing(db) as session:
        session.add(_answer(bad, "the first"))  # its id taken
    last = _delta("last")
    for run in runs:
        run.send(_delta("pending"))
    results = await asyncio.gather(
        *(run.finish(DONE, last, _answer(run)) for run in runs), return_exceptions=True
    )
    assert [isinstance(r, IntegrityError) for r in results] == [False, False, True, False, False]
    for run in runs:
        if run is not bad:
            assert await _numbers(db, run.message_id) == [1, 2, 3]
            assert await run_owner_status(db, run.message_id) == (user.id, DONE)
            saved = await _stored_answer(db, run.message_id)
            assert saved is not None and saved.content == "The answer"
    # The refused run's pending event is kept, and its end is its own again.
    bad.send(last)
    await bad.finish(DONE)
    assert await _numbers(db, bad.message_id) == [1, 2, 3]
    assert await run_owner_status(db, bad.message_id) == (user.id, DONE)


async def test_a_run_about_to_wait_has_its_events_written_then_at_most_once_a_window(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """`RunRecord.waiting` (the loop calls it before each provider call): the events pending
    are written at once instead of after the window, unless a write began less than a window
    ago, so that under load the writes stay a window apart."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=3600.0)  # only `waiting` writes before close
    (run,) = await _started(db, signals, writer, user.id, "soon", 1)
    run.send(_delta("first burst"))
    with signals.watch(run.message_id) as woken:
        woken.clear()
        run.waiting()
        await woken.wait()
    assert await _numbers(db, run.message_id) == [1, 2]
    # A write began less than a window ago: the next burst waits for its window.
    run.send(_delta("second burst"))
    run.waiting()
    await asyncio.sleep(0.1)
    assert await _numbers(db, run.message_id) == [1, 2]
    await writer.close(10.0)
    assert await _numbers(db, run.message_id) == [1, 2, 3]
