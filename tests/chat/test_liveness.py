"""Liveness under load: a process whose event loop is busy for longer than the stale limit is
not taken for dead, since its heartbeat comes from a thread, while a dead process's answers are
closed. On both databases. (tests/test_event_writer.py has an answer's real end replacing its
interrupted copy; tests/integration/test_interrupted.py kills a real process.)"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta

import httpx
from sqlalchemy import delete, select, update

from controlcenter.chat.conversations import delete_conversation
from controlcenter.chat.liveness import STALE_INTERVALS, Liveness
from controlcenter.chat.models import (
    INTERRUPTED,
    RUNNING,
    ChatEventRow,
    ChatRun,
    Message,
    RunningMessage,
)
from controlcenter.chat.resume import tail
from controlcenter.chat.run.commands import StopAnswer, request_stop
from controlcenter.chat.run.start import new_message_id, start_turn
from controlcenter.chat.run.stored import events_after
from controlcenter.chat.service import ChatParts
from controlcenter.chat.signals import Signals
from controlcenter.db import Database, utcnow
from tests.chat.helpers import CHAT, Llm, wait_for
from tests.chat.test_resume import read_frames
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import reading, writing
from tests.fakes.llm import Reply
from tests.outbox.conftest import wait_for as wait_until

INTERVAL_S = 0.2
STALE = timedelta(seconds=INTERVAL_S * STALE_INTERVALS)


async def _answer_started(
    db: Database, users: UserFactory, owner: str | None = None
) -> tuple[str, str]:
    """(conversation id, answer id) of a chat whose answer is being written, by the process
    whose liveness id is `owner` (None: no liveness row)."""
    user = await users.create()
    answer_id = new_message_id()
    started = await start_turn(
        db,
        user_id=user.id,
        conversation_id=None,
        message="hello",
        answer_id=answer_id,
        owner=owner,
    )
    assert started is not None
    return started.conversation_id, answer_id


async def _running_row(db: Database, answer_id: str) -> RunningMessage | None:
    async with reading(db) as session:
        return await session.get(RunningMessage, answer_id)


async def test_a_busy_loop_is_not_taken_for_a_dead_process(
    db: Database, users: UserFactory
) -> None:
    busy = Liveness(db, INTERVAL_S)
    _, answer_id = await _answer_started(db, users, busy.owner)
    task = asyncio.create_task(busy.run())
    try:
        busy.started(answer_id)

        async def beaten() -> bool:
            return busy.heartbeat.last_beat is not None

        # The task's first beat is over before the loop blocks: the heartbeat's thread then
        # writes on its own while the loop does nothing.
        await wait_until(beaten, within=10)
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
        async with reading(db) as session:
            assert await session.scalar(select(Message).where(Message.id == answer_id)) is None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_beat_that_finds_nothing_stale_takes_no_write_lock(
    db: Database, users: UserFactory, database_url: str
) -> None:
    """Every beat looks for stale answers; finding none, it must not wait for (nor hold) the
    write lock: a beat that took a write for nothing would wait behind every other writer,
    and the process's live answers could be closed as interrupted meanwhile."""
    _, answer_id = await _answer_started(db, users)
    async with writing(db) as session:  # a live answer of another process
        session.add(
            RunningMessage(message_id=answer_id, owner="another-process", heartbeat_at=utcnow())
        )
    writer = Database(database_url)
    try:
        async with writing(writer) as session:  # another process holds the write lock
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
    dying = Liveness(db, INTERVAL_S)
    _, answer_id = await _answer_started(db, users, dying.owner)
    task = asyncio.create_task(dying.run())
    dying.started(answer_id)
    await _stored_events(db, answer_id, [{"type": "content_delta", "delta": "Cut"}])

    async def beaten() -> bool:
        return dying.heartbeat.last_beat is not None

    await wait_until(beaten, within=10)
    task.cancel()  # its thread stops: what a killed process's heartbeat does
    await asyncio.gather(task, return_exceptions=True)
    later = utcnow() + 2 * STALE  # another process, once the row's heartbeat is stale
    assert await Liveness(db, INTERVAL_S, now=lambda: later).close_stale() == 1
    async with reading(db) as session:
        closed = await session.scalar(select(Message).where(Message.id == answer_id))
    assert closed is not None
    assert (closed.content, closed.interrupted) == ("Cut", True)


async def test_a_dead_processs_answer_is_rebuilt_from_its_stored_events(
    db: Database, users: UserFactory
) -> None:
    """The events its process stored are the whole record: the interrupted message has their
    text, tool calls and results, and the order of its text parts and tool calls."""
    dead = Liveness(db, INTERVAL_S)  # never runs: its process died
    _, answer_id = await _answer_started(db, users, dead.owner)
    call = {"id": "toolu_1", "name": "echo_text", "arguments": {"text": "é"}}
    result = {"toolCallId": "toolu_1", "success": True, "result": {"text": "é"}}
    await _stored_events(
        db,
        answer_id,
        [
            {"type": "content_delta", "delta": "First"},
            {"type": "content_delta", "delta": " and more"},
            {"type": "tool_call_start", "toolCall": call},
            {"type": "tool_result", "toolResult": result},
            {"type": "content_delta", "delta": "Then"},
        ],
    )
    later = utcnow() + 2 * STALE
    assert await Liveness(db, INTERVAL_S, now=lambda: later).close_stale() == 1
    async with reading(db) as session:
        closed = await session.scalar(select(Message).where(Message.id == answer_id))
    assert closed is not None and closed.interrupted
    assert (closed.content, closed.tool_calls, closed.tool_results) == (
        "First and moreThen",
        [call],
        [result],
    )
    assert closed.parts == [
        {"type": "text", "text": "First and more"},
        {"type": "toolCall", "toolCallId": "toolu_1"},
        {"type": "text", "text": "Then"},
    ]


async def _stored_events(db: Database, answer_id: str, events: list[dict[str, object]]) -> None:
    """The events a run's writer stored after its `message_start`."""
    async with writing(db) as session:
        for n, event in enumerate(events, start=2):
            session.add(ChatEventRow(message_id=answer_id, n=n, data=json.dumps(event)))


async def test_a_run_cut_before_its_first_event_after_message_start_is_closed(
    db: Database, users: UserFactory
) -> None:
    """The process died right after the turn's start (no event of the answer stored beyond
    `message_start`, nothing of the liveness task run): the run's row, written with the turn,
    is enough for another process to close it, once, and the run's stream ends with the
    interrupted error, a stop then being refused as for any run that ended."""
    dead = Liveness(db, INTERVAL_S)  # never runs: its process died before its first beat
    conversation_id, answer_id = await _answer_started(db, users, dead.owner)
    later = utcnow() + 2 * STALE
    closer = Liveness(db, INTERVAL_S, now=lambda: later)
    assert await closer.close_stale() == 1
    assert await closer.close_stale() == 0  # closed once
    assert await _running_row(db, answer_id) is None
    async with reading(db) as session:
        closed = await session.scalar(select(Message).where(Message.id == answer_id))
        run = await session.get(ChatRun, answer_id)
    assert closed is not None
    assert (closed.content, closed.interrupted, closed.conversation_id) == (
        "",
        True,
        conversation_id,
    )
    assert run is not None and run.status == INTERRUPTED
    signals = Signals(db)
    try:
        frames = [frame async for frame in tail(db, signals, answer_id, 0)]
    finally:
        await signals.aclose()
    assert [json.loads(f.split(b"data: ", 1)[1]) for f in frames][-1] == {
        "type": "error",
        "error": "The answer was interrupted",
    }
    assert len(frames) == 2  # message_start, then the error
    assert await request_stop(db, Signals(db), answer_id, run.user_id) == StopAnswer.NOT_RUNNING


async def test_a_run_whose_conversation_was_deleted_before_its_process_died_is_closed(
    db: Database, users: UserFactory
) -> None:
    """The conversation deleted while its answer ran (a stop asked), then the process died
    before it ended the run: the liveness row outlives the conversation, so another process
    still closes the run, and its stream ends with the interrupted error."""
    dead = Liveness(db, INTERVAL_S)  # never runs: its process died
    conversation_id, answer_id = await _answer_started(db, users, dead.owner)
    async with reading(db) as session:
        run = await session.get(ChatRun, answer_id)
    assert run is not None
    assert await delete_conversation(db, run.user_id, conversation_id)
    later = utcnow() + 2 * STALE
    assert await Liveness(db, INTERVAL_S, now=lambda: later).close_stale() == 1
    assert await _running_row(db, answer_id) is None
    async with reading(db) as session:
        run = await session.get(ChatRun, answer_id)
        saved = await session.scalar(select(Message).where(Message.id == answer_id))
    assert run is not None and run.status == INTERRUPTED
    assert saved is None  # there is no conversation to save it in
    stored = await events_after(db, answer_id, 0)
    assert json.loads(stored[-1][1]) == {"type": "error", "error": "The answer was interrupted"}
    assert await request_stop(db, Signals(db), answer_id, run.user_id) == StopAnswer.NOT_RUNNING


async def test_a_run_still_marked_running_without_its_liveness_row_is_closed(
    db: Database, users: UserFactory
) -> None:
    """A run left `running` with no liveness row (its end could not be stored, or it began
    before runs had a row) is closed once past the stale limit, by any process, its own
    included: its stream ends with the interrupted error. A younger one is left alone."""
    own = Liveness(db, 60.0, now=utcnow)
    _, old_id = await _answer_started(db, users, own.owner)
    _, young_id = await _answer_started(db, users, own.owner)
    async with writing(db) as session:
        await session.execute(
            delete(RunningMessage).where(RunningMessage.message_id.in_([old_id, young_id]))
        )
        await session.execute(
            update(ChatRun)
            .where(ChatRun.message_id == old_id)
            .values(created_at=utcnow() - timedelta(hours=1))
        )
    now = utcnow()
    closer = Liveness(db, 60.0, now=lambda: now)
    closer.owner = own.owner  # the run's own process
    assert await closer.close_stale() >= 1
    assert await closer.close_stale() == 0  # closed once
    async with reading(db) as session:
        old = await session.get(ChatRun, old_id)
        young = await session.get(ChatRun, young_id)
    assert old is not None and old.status == INTERRUPTED
    assert young is not None and young.status == RUNNING
    stored = await events_after(db, old_id, 0)
    assert json.loads(stored[-1][1]) == {"type": "error", "error": "The answer was interrupted"}
    assert await request_stop(db, Signals(db), old_id, old.user_id) == StopAnswer.NOT_RUNNING


async def test_a_live_run_is_not_closed(db: Database, users: UserFactory) -> None:
    """Its row's heartbeat is fresh: nothing to close, the run stays running."""
    alive = Liveness(db, INTERVAL_S)
    _, answer_id = await _answer_started(db, users, alive.owner)
    assert await Liveness(db, INTERVAL_S).close_stale() == 0
    async with reading(db) as session:
        run = await session.get(ChatRun, answer_id)
    assert run is not None and run.status == RUNNING


async def test_an_answers_end_deletes_its_liveness_row_in_the_same_write(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    """The row is gone once `message_complete` arrives: deleted with the run's end, not by a
    write of its own afterwards."""
    llm.fake.script(Reply(text="done"))
    body = {"message": "hi", "provider": llm.name}
    frames = await read_frames(client, "POST", f"{CHAT}?ids=1", user, body=body)
    assert frames[-1][1]["type"] == "message_complete"
    assert await _running_row(server.db, frames[0][1]["messageId"]) is None


async def test_a_run_cancelled_at_shutdown_ends_its_stream_as_interrupted(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    """Past the drain, a run still waiting is cancelled: its stored stream ends with the
    interrupted error, and its liveness row stays for another process to save the answer."""
    llm.fake.script(Reply(text="never shown", delay_s=60))
    body = {"message": "hi", "provider": llm.name}
    first = await read_frames(client, "POST", f"{CHAT}?ids=1", user, body=body, stop_after=1)
    message_id = first[0][1]["messageId"]
    await wait_for(lambda: _true(len(llm.fake.requests) == 1))
    chat: ChatParts = server.app.state.chat
    await chat.runs.drain(0.01)
    stored = await events_after(server.db, message_id, 1)
    assert json.loads(stored[-1][1]) == {"type": "error", "error": "The answer was interrupted"}
    async with reading(server.db) as session:
        run = await session.get(ChatRun, message_id)
    assert run is not None and run.status == INTERRUPTED
    # The liveness task still runs (the server goes on): an answer that ends now has its row
    # deleted, the interrupted one keeps its own for another process.
    llm.fake.script(Reply(text="done"))
    ended = await read_frames(client, "POST", f"{CHAT}?ids=1", user, body=body)
    ended_id = ended[0][1]["messageId"]
    assert ended[-1][1]["type"] == "message_complete"

    async def deleted() -> bool:
        return await _running_row(server.db, ended_id) is None

    await wait_until(deleted, within=30)
    assert await _running_row(server.db, message_id) is not None


async def _true(value: bool) -> bool:
    return value
