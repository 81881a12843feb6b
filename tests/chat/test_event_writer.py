"""The process's event writer (chat.recorder.EventWriter): the events and ends of many runs
share transactions, each run's events land in order with none lost, one run's failing write
loses nothing of the others, and what is pending at shutdown is written. On both databases."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from controlcenter.chat import run_store
from controlcenter.chat.conversations import (
    assistant_message,
    save_assistant_message,
    start_turn,
)
from controlcenter.chat.events import content_delta, event_data, message_start
from controlcenter.chat.models import ChatRun, Conversation, Message
from controlcenter.chat.recorder import EventWriter, RunRecord
from controlcenter.chat.run_store import RunEnd, RunUsage
from controlcenter.chat.signals import Signals
from controlcenter.db import Database, refused_row
from tests.conftest import UserFactory

RUNS = 40
EVENTS = 25


class Commits:
    """The write transactions while only the writer writes: each opens through the database's
    `write()` (a session) or `write_driver()` (the writer's runs, in the driver's own SQL on
    a connection the database holds, so neither a pool checkout nor SQLAlchemy's commit tells
    them)."""

    def __init__(self, db: Database) -> None:
        self.count = 0
        self._db = db
        for name in ("write", "write_driver"):
            setattr(db, name, self._counted(getattr(db, name)))

    def _counted(self, opens: Callable[[], Any]) -> Callable[[], Any]:
        def counted() -> Any:
            self.count += 1
            return opens()

        return counted

    def close(self) -> None:
        for name in ("write", "write_driver"):
            delattr(self._db, name)


@pytest.fixture
async def parts(database_url: str) -> AsyncIterator[tuple[Database, Signals]]:
    db = Database(database_url)
    signals = Signals(db, on_stop=lambda _: None)
    try:
        yield db, signals
    finally:
        await signals.aclose()
        await db.dispose()


async def _started(
    db: Database, signals: Signals, writer: EventWriter, user_id: str, tag: str, count: int
) -> list[RunRecord]:
    runs = []
    for i in range(count):
        message_id = f"msg_1_{tag}{i:05d}"
        run = RunRecord(db, signals, writer, message_id)
        await run_store.create_run(
            db, message_id, user_id, (1, event_data(message_start("c", message_id)))
        )
        run.began()
        runs.append(run)
    return runs


async def _stream(run: RunRecord, events: int) -> None:
    for i in range(events):
        run.record(event_data(content_delta(f"{run.message_id} part {i}")))
        await asyncio.sleep(0.002)  # a provider's pace: bursts of a few events per window
    run.count_provider_call(10, 5)
    await run.finish(run_store.DONE)


async def test_many_runs_share_transactions_and_keep_every_event_in_order(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals)
    runs = await _started(db, signals, writer, user.id, "many", RUNS)
    commits = Commits(db)
    try:
        await asyncio.gather(*(_stream(run, EVENTS) for run in runs))
    finally:
        commits.close()
    for run in runs:
        stored = await run_store.events_after(db, run.message_id, 0)
        assert [n for n, _ in stored] == list(range(1, EVENTS + 2))
        assert stored[-1][1] == event_data(content_delta(f"{run.message_id} part {EVENTS - 1}"))
    async with db.read() as session:
        ended = (
            await session.execute(
                select(ChatRun.status, ChatRun.input_tokens, ChatRun.provider_calls).where(
                    ChatRun.message_id.in_([run.message_id for run in runs])
                )
            )
        ).all()
    assert sorted(ended) == [(run_store.DONE, 10, 1)] * RUNS
    # 1,000 events and 40 ends: one transaction each would be 1,040; by windows, a few dozen.
    assert 0 < commits.count < (RUNS * (EVENTS + 1)) / 10, commits.count


async def test_a_run_whose_write_fails_loses_nothing_of_the_others(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=0.2)  # everything below shares one window
    good, bad = await _started(db, signals, writer, user.id, "fail", 2)
    good.record(event_data(content_delta("kept")))
    # An event number already stored: the database refuses the row, and with it the batch.
    writer.add(bad.message_id, (1, event_data(content_delta("duplicate"))))
    results = await asyncio.gather(
        good.finish(run_store.DONE),
        writer.end(bad.message_id, RunEnd(run_store.DONE, RunUsage())),
        return_exceptions=True,
    )
    assert results[0] is None
    assert isinstance(results[1], Exception)
    assert [n for n, _ in await run_store.events_after(db, good.message_id, 0)] == [1, 2]
    assert await run_store.run_owner_status(db, good.message_id) == (user.id, run_store.DONE)
    # The failed run's end was not stored, and its caller was told so.
    assert await run_store.run_owner_status(db, bad.message_id) == (user.id, run_store.RUNNING)


async def test_pending_events_are_written_at_shutdown(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=0.3)
    (run,) = await _started(db, signals, writer, user.id, "close", 1)
    run.record(event_data(content_delta("last words")))
    assert [n for n, _ in await run_store.events_after(db, run.message_id, 0)] == [1]
    await writer.close(5.0)
    assert [n for n, _ in await run_store.events_after(db, run.message_id, 0)] == [1, 2]


async def test_readers_are_woken_once_the_events_are_stored(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals)
    (run,) = await _started(db, signals, writer, user.id, "wake", 1)
    with signals.watch(run.message_id) as woken:
        woken.clear()
        run.record(event_data(content_delta("news")))
        await asyncio.wait_for(woken.wait(), 5)
        assert [n for n, _ in await run_store.events_after(db, run.message_id, 0)] == [1, 2]
    await run.finish(run_store.DONE)


async def _conversation(db: Database, user_id: str) -> str:
    started = await start_turn(db, user_id=user_id, conversation_id=None, message="Hello")
    assert started is not None
    return started.conversation_id


def _answer(conversation_id: str, run: RunRecord, content: str = "The answer") -> Message:
    return assistant_message(
        conversation_id=conversation_id, message_id=run.message_id, content=content,
        tool_calls=[{"id": "t1", "name": "echo_text", "arguments": {"text": "x"}}],
        tool_results=[{"toolCallId": "t1", "success": True, "result": "x"}],
        usage={"inputTokens": 3, "outputTokens": 4, "providerCalls": 1},
    )  # fmt: skip


async def _stored_answer(db: Database, message_id: str) -> Message | None:
    async with db.read() as session:
        return await session.scalar(select(Message).where(Message.id == message_id))


async def _updated_at(db: Database, conversation_id: str) -> datetime:
    async with db.read() as session:
        conversation = await session.get(Conversation, conversation_id)
        assert conversation is not None
        return conversation.updated_at


async def test_the_answer_the_last_events_and_the_end_are_one_write(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """A chat's last write (`finish_with`): the events still waiting for the window, the last
    event, the run's end and the assistant message (touching its conversation), in one
    transaction; readers woken."""
    db, signals = parts
    user = await users.create()
    conversation_id = await _conversation(db, user.id)
    writer = EventWriter(db, signals, window_s=30.0)  # the window alone would write nothing here
    (run,) = await _started(db, signals, writer, user.id, "last", 1)
    run.record(event_data(content_delta("pending")))
    last = event_data(content_delta("the last one"))
    answer = _answer(conversation_id, run)
    commits = Commits(db)
    try:
        with signals.watch(run.message_id) as woken:
            woken.clear()
            n = await asyncio.wait_for(run.finish_with(last, run_store.DONE, answer), 5)
            assert woken.is_set()
    finally:
        commits.close()
    assert n == 3
    stored = await run_store.events_after(db, run.message_id, 0)
    assert [n for n, _ in stored] == [1, 2, 3] and stored[-1][1] == last
    assert await run_store.run_owner_status(db, run.message_id) == (user.id, run_store.DONE)
    saved = await _stored_answer(db, run.message_id)
    assert saved is not None
    assert (saved.role, saved.content, saved.interrupted) == ("assistant", "The answer", False)
    assert (saved.tool_calls, saved.tool_results, saved.usage) == (
        answer.tool_calls,
        answer.tool_results,
        answer.usage,
    )
    assert saved.created_at == answer.created_at
    assert await _updated_at(db, conversation_id) == answer.created_at
    assert commits.count == 1
    await run.finish(run_store.FAILED)  # already ended: nothing more is written
    assert await run_store.run_owner_status(db, run.message_id) == (user.id, run_store.DONE)


async def test_answers_of_one_conversation_ending_together_leave_it_the_later_s_time(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = parts
    user = await users.create()
    conversation_id = await _conversation(db, user.id)
    writer = EventWriter(db, signals)
    runs = await _started(db, signals, writer, user.id, "same", 2)
    answers = [_answer(conversation_id, run) for run in runs]
    answers[0].created_at += timedelta(seconds=1)  # the later one, first in the write
    async with db.write_driver() as driver:
        await run_store.write_ends(db, driver, answers, {}, {})
    assert await _updated_at(db, conversation_id) == answers[0].created_at


async def test_the_last_write_waits_for_a_batch_holding_earlier_events(
    parts: tuple[Database, Signals], users: UserFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events commit in their order even when the window's batch is still being written (on
    PostgreSQL nothing else would keep the last transaction from committing first)."""
    db, signals = parts
    user = await users.create()
    conversation_id = await _conversation(db, user.id)
    writer = EventWriter(db, signals, window_s=0.01)
    (run,) = await _started(db, signals, writer, user.id, "order", 1)
    entered, release = asyncio.Event(), asyncio.Event()
    order: list[str] = []
    write_batch, write_ends = run_store.write_batch, run_store.write_ends

    async def slow_batch(*args: Any) -> None:
        entered.set()
        await release.wait()
        await write_batch(*args)
        order.append("batch")

    async def last_write(*args: Any) -> None:
        order.append("last")
        await write_ends(*args)

    monkeypatch.setattr(run_store, "write_batch", slow_batch)
    monkeypatch.setattr(run_store, "write_ends", last_write)
    run.record(event_data(content_delta("in the window's batch")))
    await asyncio.wait_for(entered.wait(), 5)
    finishing = asyncio.create_task(
        run.finish_with(
            event_data(content_delta("last")), run_store.DONE, _answer(conversation_id, run)
        )
    )
    await asyncio.sleep(0.1)
    assert order == [] and not finishing.done()
    release.set()
    assert await asyncio.wait_for(finishing, 5) == 3
    assert order == ["batch", "last"]
    assert [n for n, _ in await run_store.events_after(db, run.message_id, 0)] == [1, 2, 3]


async def test_a_refused_last_write_loses_nothing_and_the_writer_finishes_the_run(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """The database refuses the answer (its conversation was deleted meanwhile: the foreign
    key): nothing of the last write is stored, and the run still ends by the writer."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=0.1)
    (run,) = await _started(db, signals, writer, user.id, "refused", 1)
    run.record(event_data(content_delta("pending")))
    last = event_data(content_delta("last"))
    with pytest.raises(Exception) as refused:
        await run.finish_with(last, run_store.DONE, _answer("no-such-conversation", run))
    assert refused_row(refused.value), refused.value
    assert await run_store.run_owner_status(db, run.message_id) == (user.id, run_store.RUNNING)
    assert await _stored_answer(db, run.message_id) is None
    # The pending event is the writer's again; the last one is sent the usual way, numbered
    # after it, with no gap.
    assert run.record(last) == 3
    await asyncio.wait_for(run.finish(run_store.DONE), 5)
    stored = await run_store.events_after(db, run.message_id, 0)
    assert [n for n, _ in stored] == [1, 2, 3] and stored[-1][1] == last
    assert await run_store.run_owner_status(db, run.message_id) == (user.id, run_store.DONE)


async def test_nothing_of_the_last_write_is_stored_when_the_answer_is_refused(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """The answer and the last events commit together or not at all (its id is taken: the
    database refuses the row after the events' statement would have run)."""
    db, signals = parts
    user = await users.create()
    conversation_id = await _conversation(db, user.id)
    writer = EventWriter(db, signals, window_s=30.0)
    (run,) = await _started(db, signals, writer, user.id, "atomic", 1)
    taken = await save_assistant_message(db, _answer(conversation_id, run, "the first"))
    touched = await _updated_at(db, conversation_id)
    with pytest.raises(Exception) as refused:
        await run.finish_with(
            event_data(content_delta("the last one")),
            run_store.DONE,
            _answer(conversation_id, run, "a second answer under the same id"),
        )
    assert refused_row(refused.value), refused.value
    assert [n for n, _ in await run_store.events_after(db, run.message_id, 0)] == [1]
    assert await run_store.run_owner_status(db, run.message_id) == (user.id, run_store.RUNNING)
    saved = await _stored_answer(db, run.message_id)
    assert saved is not None and saved.content == taken.content
    assert await _updated_at(db, conversation_id) == touched


async def _written(signals: Signals, run: RunRecord, delta: str) -> None:
    """One event recorded, once the writer has stored it (readers are woken then)."""
    with signals.watch(run.message_id) as woken:
        woken.clear()
        run.record(event_data(content_delta(delta)))
        await asyncio.wait_for(woken.wait(), 5)


@pytest.mark.postgresql_only
async def test_a_connection_the_server_dropped_is_replaced_and_nothing_is_lost(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """PostgreSQL closes the connection the writer used (a restart, an administrator's
    `pg_terminate_backend`), now idle in the pool: the next batch is written on a new
    connection, every event stored once and in order."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=0.01)
    (run,) = await _started(db, signals, writer, user.id, "dropped", 1)
    async with db.read() as session:
        since = await session.scalar(text("SELECT clock_timestamp()"))
    await _written(signals, run, "before")  # the writer's statement, on a pooled connection
    # From outside the pool, so that the pool's own connections are all candidates: those idle
    # since they ran a statement after `since` (the writer's among them; its last statement
    # is its transaction's COMMIT). Other tests' and processes' connections are left be.
    outside = create_async_engine(db.url, poolclass=NullPool)
    try:
        async with outside.connect() as connection:
            ended = await connection.scalar(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE query_start >= :since AND state = 'idle'"
                    " AND datname = current_database() AND pid <> pg_backend_pid()"
                ),
                {"since": since},
            )
    finally:
        await outside.dispose()
    assert ended >= 1
    await _written(signals, run, "after")
    await asyncio.wait_for(run.finish(run_store.DONE), 10)
    stored = await run_store.events_after(db, run.message_id, 0)
    assert [n for n, _ in stored] == [1, 2, 3]
    assert stored[-1][1] == event_data(content_delta("after"))
    assert await run_store.run_owner_status(db, run.message_id) == (user.id, run_store.DONE)


async def test_answers_ending_while_one_is_written_share_the_next_transaction(
    parts: tuple[Database, Signals], users: UserFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group commit of the runs' last writes: the first is written at once; those asked
    while it is under way wait for it and go together in the next transaction, each with its
    own events, end and rows."""
    db, signals = parts
    user = await users.create()
    conversation_id = await _conversation(db, user.id)
    writer = EventWriter(db, signals, window_s=30.0)  # the window alone would write nothing
    first, *others = await _started(db, signals, writer, user.id, "group", 20)
    for run in (first, *others):
        run.record(event_data(content_delta(f"{run.message_id} pending")))
    entered, release = asyncio.Event(), asyncio.Event()
    write_ends = run_store.write_ends

    async def held(*args: Any) -> None:
        if not entered.is_set():  # the first write: held until released
            entered.set()
            await release.wait()
        await write_ends(*args)

    monkeypatch.setattr(run_store, "write_ends", held)
    last = event_data(content_delta("last"))
    commits = Commits(db)
    try:
        ending = [
            asyncio.create_task(
                first.finish_with(last, run_store.DONE, _answer(conversation_id, first))
            )
        ]
        await asyncio.wait_for(entered.wait(), 5)
        ending += [
            asyncio.create_task(
                run.finish_with(last, run_store.DONE, _answer(conversation_id, run))
            )
            for run in others
        ]
        await asyncio.sleep(0.1)
        assert not any(task.done() for task in ending)
        release.set()
        assert await asyncio.wait_for(asyncio.gather(*ending), 10) == [3] * 20
    finally:
        commits.close()
    assert commits.count == 2
    for run in (first, *others):
        stored = await run_store.events_after(db, run.message_id, 0)
        assert [n for n, _ in stored] == [1, 2, 3] and stored[-1][1] == last
        assert await run_store.run_owner_status(db, run.message_id) == (user.id, run_store.DONE)
        saved = await _stored_answer(db, run.message_id)
        assert saved is not None and saved.content == "The answer"


async def test_an_answer_refused_in_a_shared_transaction_fails_alone(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    db, signals = parts
    user = await users.create()
    conversation_id = await _conversation(db, user.id)
    writer = EventWriter(db, signals, window_s=0.1)
    runs = await _started(db, signals, writer, user.id, "alone", 5)
    bad = runs[2]
    await save_assistant_message(db, _answer(conversation_id, bad, "the first"))  # its id taken
    last = event_data(content_delta("last"))
    for run in runs:
        run.record(event_data(content_delta("pending")))
    results = await asyncio.gather(
        *(run.finish_with(last, run_store.DONE, _answer(conversation_id, run)) for run in runs),
        return_exceptions=True,
    )
    assert [isinstance(r, Exception) and refused_row(r) for r in results] == [
        False, False, True, False, False,
    ]  # fmt: skip
    for run in runs:
        if run is not bad:
            assert [n for n, _ in await run_store.events_after(db, run.message_id, 0)] == [1, 2, 3]
            assert await run_store.run_owner_status(db, run.message_id) == (
                user.id,
                run_store.DONE,
            )
            saved = await _stored_answer(db, run.message_id)
            assert saved is not None and saved.content == "The answer"
    # The refused run's pending event is the writer's again, and its end is the caller's.
    assert bad.record(last) == 3
    await asyncio.wait_for(bad.finish(run_store.DONE), 5)
    assert [n for n, _ in await run_store.events_after(db, bad.message_id, 0)] == [1, 2, 3]
    assert await run_store.run_owner_status(db, bad.message_id) == (user.id, run_store.DONE)


async def test_a_run_about_to_wait_has_its_events_written_then_at_most_once_a_window(
    parts: tuple[Database, Signals], users: UserFactory
) -> None:
    """`RunRecord.waiting` (the agent calls it before each provider call): the events pending
    are written at once instead of after the window, unless a write began less than a window
    ago, so that under load the writes stay a window apart."""
    db, signals = parts
    user = await users.create()
    writer = EventWriter(db, signals, window_s=1.0)
    (run,) = await _started(db, signals, writer, user.id, "soon", 1)

    async def stored() -> list[int]:
        return [n for n, _ in await run_store.events_after(db, run.message_id, 0)]

    run.record(event_data(content_delta("first burst")))
    await asyncio.sleep(0.05)  # the window has begun
    started = asyncio.get_running_loop().time()
    with signals.watch(run.message_id) as woken:
        woken.clear()
        run.waiting()
        await asyncio.wait_for(woken.wait(), 5)
    assert asyncio.get_running_loop().time() - started < 0.5  # not the 1 s window
    assert await stored() == [1, 2]
    # A write began just now: the next burst waits for its window, waiting() or not.
    run.record(event_data(content_delta("second burst")))
    await asyncio.sleep(0.05)
    run.waiting()
    await asyncio.sleep(0.3)
    assert await stored() == [1, 2]
    with signals.watch(run.message_id) as woken:
        woken.clear()
        await asyncio.wait_for(woken.wait(), 5)
    assert await stored() == [1, 2, 3]
    await asyncio.wait_for(run.finish(run_store.DONE), 5)
