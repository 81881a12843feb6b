"""Liveness under load: a process whose event loop is busy for longer than the stale limit is
not taken for dead, since its heartbeat comes from a thread, while a dead process's answers are
closed. On both databases. (tests/test_event_writer.py has an answer's real end replacing its
interrupted copy; tests/integration/test_interrupted.py kills a real process.)"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from sqlalchemy import select, update

from controlcenter.chat.liveness import FLUSH_DELAY_S, STALE_INTERVALS, Liveness
from controlcenter.chat.models import Message, RunningMessage
from controlcenter.chat.store import new_message_id, start_turn
from controlcenter.db import Database, utcnow
from tests.conftest import UserFactory
from tests.outbox.conftest import wait_for

INTERVAL_S = 0.2
STALE = timedelta(seconds=INTERVAL_S * STALE_INTERVALS)


async def _answer_started(db: Database, users: UserFactory) -> tuple[str, str]:
    """(conversation id, answer id) of a chat whose answer is being written."""
    user = await users.create()
    answer_id = new_message_id()
    started = await start_turn(
        db, user_id=user.id, conversation_id=None, message="hello", answer_id=answer_id
    )
    assert started is not None
    return started.conversation_id, answer_id


async def _running_row(db: Database, answer_id: str) -> RunningMessage | None:
    async with db.read() as session:
        return await session.get(RunningMessage, answer_id)


async def test_a_busy_loop_is_not_taken_for_a_dead_process(
    db: Database, users: UserFactory
) -> None:
    conversation_id, answer_id = await _answer_started(db, users)
    busy = Liveness(db, INTERVAL_S)
    task = asyncio.create_task(busy.run())
    try:
        answer = busy.started(conversation_id, answer_id)
        answer.apply({"type": "content_delta", "delta": "Half an ans"})

        async def written() -> bool:
            return await _running_row(db, answer_id) is not None

        await wait_for(written, within=10 + FLUSH_DELAY_S)
        # The loop does nothing else for longer than the stale limit (a burst of chats), and
        # until the heartbeat's thread has beaten meanwhile.
        blocked = utcnow()
        time.sleep(STALE.total_seconds())  # noqa: ASYNC251 - the point of it
        # Waits for the thread's beat, with no bound of its own: a thread that never beats
        # fails the test through the suite's per-test timeout.
        while (busy.heartbeat.last_beat or blocked) <= blocked:
            time.sleep(0.01)  # noqa: ASYNC251 - the point of it
        # Another process, looking when a loop-driven heartbeat would be stale by now.
        other = Liveness(db, INTERVAL_S, now=lambda: blocked + STALE)
        assert await other.close_stale() == 0
        row = await _running_row(db, answer_id)
        assert row is not None and row.heartbeat_at > blocked
        async with db.read() as session:
            assert await session.scalar(select(Message).where(Message.id == answer_id)) is None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_beat_that_finds_nothing_stale_takes_no_write_lock(
    db: Database, users: UserFactory, database_url: str
) -> None:
    """Every beat looks for stale answers; finding none, it must not wait for (nor hold) the
    write lock: held while the loop was blocked, it kept the heartbeat's thread from
    writing, and the process's live answers were closed as interrupted."""
    conversation_id, answer_id = await _answer_started(db, users)
    async with db.write() as session:  # a live answer of another process
        session.add(
            RunningMessage(
                message_id=answer_id,
                conversation_id=conversation_id,
                owner="another-process",
                heartbeat_at=utcnow(),
                content="",
            )
        )
    writer = Database(database_url)
    try:
        async with writer.write() as session:  # another process holds the write lock
            await session.execute(
                update(RunningMessage)
                .where(RunningMessage.message_id == answer_id)
                .values(heartbeat_at=utcnow())
            )
            beat = Liveness(db, INTERVAL_S).close_stale()
            assert await asyncio.wait_for(beat, timeout=5) == 0
    finally:
        await writer.dispose()


async def test_a_dead_process_is_still_closed(db: Database, users: UserFactory) -> None:
    """The heartbeat's thread stops with its process: its answers are closed as before."""
    conversation_id, answer_id = await _answer_started(db, users)
    dying = Liveness(db, INTERVAL_S)
    task = asyncio.create_task(dying.run())
    dying.started(conversation_id, answer_id).apply({"type": "content_delta", "delta": "Cut"})

    async def written() -> bool:
        return await _running_row(db, answer_id) is not None

    await wait_for(written, within=10 + FLUSH_DELAY_S)
    task.cancel()  # its thread stops: what a killed process's heartbeat does
    await asyncio.gather(task, return_exceptions=True)
    later = utcnow() + 2 * STALE  # another process, once the row's heartbeat is stale
    assert await Liveness(db, INTERVAL_S, now=lambda: later).close_stale() == 1
    async with db.read() as session:
        closed = await session.scalar(select(Message).where(Message.id == answer_id))
    assert closed is not None
    assert (closed.content, closed.interrupted) == ("Cut", True)


async def test_what_the_answers_gain_after_their_first_write_is_saved_at_the_next_beat(
    db: Database, users: UserFactory
) -> None:
    """Each running answer's row follows it (content, tool calls, results): what a process
    that dies leaves of it; several answers' changes in one statement."""
    started = [await _answer_started(db, users) for _ in range(3)]
    liveness = Liveness(db, INTERVAL_S)
    task = asyncio.create_task(liveness.run())
    try:
        answers = [liveness.started(c, a) for c, a in started]
        for answer in answers:
            answer.apply({"type": "content_delta", "delta": "First"})

        async def all_written() -> bool:
            return all([await _running_row(db, a) is not None for _, a in started])

        await wait_for(all_written, within=10 + FLUSH_DELAY_S)
        call = {"id": "toolu_1", "name": "echo_text", "arguments": {"text": "é"}}
        result = {"toolCallId": "toolu_1", "success": True, "result": {"text": "é"}}
        for answer in answers[:2]:
            answer.apply({"type": "content_delta", "delta": " and more"})
            answer.apply({"type": "tool_call_start", "toolCall": call})
            answer.apply({"type": "tool_result", "toolResult": result})

        async def saved() -> bool:
            row = await _running_row(db, started[1][1])
            return row is not None and row.content == "First and more"

        await wait_for(saved, within=10)
        for (_, answer_id), gained in zip(started, (True, True, False), strict=True):
            row = await _running_row(db, answer_id)
            assert row is not None
            if gained:
                assert (row.content, row.tool_calls, row.tool_results) == (
                    "First and more",
                    [call],
                    [result],
                )
            else:
                assert (row.content, row.tool_calls, row.tool_results) == ("First", None, None)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
