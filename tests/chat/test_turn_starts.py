"""The chats of a process start in shared transactions (conversations.TurnStarts): each gets
what `start_turn` alone gives it (a new or continued conversation, its history, the run with
message_start, or None for a conversation not the caller's); one the database refuses fails
alone. On both databases."""

from __future__ import annotations

import asyncio

from sqlalchemy import delete, func, select

from controlcenter.chat import run_store
from controlcenter.chat.conversations import StoredText, TurnStart, TurnStarts, start_turn
from controlcenter.chat.models import Conversation, Message
from controlcenter.db import Database
from tests.chat.test_event_writer import Commits
from tests.conftest import UserFactory


async def _messages(db: Database, conversation_id: str) -> list[str]:
    async with db.read() as session:
        rows = await session.scalars(
            select(Message.content)
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.seq)
        )
        return list(rows)


async def test_chats_starting_together_share_one_transaction(
    db: Database, users: UserFactory
) -> None:
    mine, theirs = await users.create(), await users.create()
    kept = await start_turn(db, user_id=mine.id, conversation_id=None, message="Earlier")
    other = await start_turn(db, user_id=theirs.id, conversation_id=None, message="Theirs")
    assert kept is not None and other is not None
    starts = TurnStarts(db)
    asked = [
        TurnStart(mine.id, None, f"New {i}", answer_id=f"msg_1_start{i:05d}") for i in range(8)
    ]
    asked += [
        TurnStart(mine.id, kept.conversation_id, "Again", answer_id="msg_1_startagain"),
        # Continued twice in one transaction: the second reads the first as if it had committed.
        TurnStart(mine.id, kept.conversation_id, "Once more", answer_id="msg_1_startonce"),
        TurnStart(mine.id, other.conversation_id, "Not mine", answer_id="msg_1_startnotmine"),
        TurnStart(mine.id, 42, "Not an id", answer_id="msg_1_startnotanid"),
    ]
    commits = Commits(db)
    try:
        started = await asyncio.wait_for(asyncio.gather(*map(starts.start, asked)), 10)
    finally:
        commits.close()
    assert commits.count == 1
    assert started[-2:] == [None, None]
    new = started[:8]
    assert all(s is not None and s.history == () for s in new)
    assert len({s.conversation_id for s in new if s is not None}) == 8
    again, once = started[8:10]
    assert again is not None and again.conversation_id == kept.conversation_id
    assert again.history == (StoredText("user", "Earlier"),)
    assert once is not None and once.conversation_id == kept.conversation_id
    assert once.history == (StoredText("user", "Earlier"), StoredText("user", "Again"))
    assert await _messages(db, kept.conversation_id) == ["Earlier", "Again", "Once more"]
    assert await _messages(db, other.conversation_id) == ["Theirs"]
    async with db.read() as session:
        continued = await session.get(Conversation, kept.conversation_id)
        titles = await session.scalars(
            select(Conversation.title).where(Conversation.user_id == mine.id)
        )
        assert set(titles) == {"Earlier", *(f"New {i}" for i in range(8))}
    assert continued is not None and continued.updated_at > continued.created_at
    for start, turn in zip(asked[:10], started[:10], strict=True):
        assert turn is not None and start.answer_id is not None
        stored = await run_store.events_after(db, start.answer_id, 0)
        assert [n for n, _ in stored] == [1] and turn.conversation_id in stored[0][1]
    for refused in ("msg_1_startnotmine", "msg_1_startnotanid"):
        assert await run_store.run_owner_status(db, refused) is None


async def test_a_start_the_database_refuses_fails_alone(db: Database, users: UserFactory) -> None:
    user = await users.create()
    await start_turn(db, user_id=user.id, conversation_id=None, message="x", answer_id="msg_1_dup")
    async with db.read() as session:
        before = await session.scalar(select(func.count()).select_from(Message))
    starts = TurnStarts(db)
    results = await asyncio.gather(
        starts.start(TurnStart(user.id, None, "ok 1", answer_id="msg_1_fine1")),
        starts.start(TurnStart(user.id, None, "refused", answer_id="msg_1_dup")),  # run taken
        starts.start(TurnStart(user.id, None, "ok 2", answer_id="msg_1_fine2")),
        return_exceptions=True,
    )
    # The driver's own error (the run's row is written in its SQL): a unique violation.
    assert isinstance(results[1], Exception) and "unique" in str(results[1]).lower()
    assert all(r is not None and not isinstance(r, BaseException) for r in (results[0], results[2]))
    async with db.read() as session:
        after = await session.scalar(select(func.count()).select_from(Message))
    assert after == (before or 0) + 2  # the refused start saved nothing
    for answer in ("msg_1_fine1", "msg_1_fine2"):
        assert await run_store.run_owner_status(db, answer) == (user.id, run_store.RUNNING)


async def test_a_conversation_without_messages_is_continued_with_an_empty_history(
    db: Database, users: UserFactory
) -> None:
    """Its own, with no stored message (one statement reads ownership and history: no row is
    "not yours", a row of NULLs is "yours, empty"), and another user's is not found."""
    mine, theirs = await users.create(), await users.create()
    kept = await start_turn(db, user_id=mine.id, conversation_id=None, message="Gone")
    assert kept is not None
    async with db.write() as session:
        await session.execute(
            delete(Message).where(Message.conversation_id == kept.conversation_id)
        )
    again = await start_turn(
        db, user_id=mine.id, conversation_id=kept.conversation_id, message="Hi"
    )
    assert again is not None and again.history == ()
    assert await _messages(db, kept.conversation_id) == ["Hi"]
    stolen = await start_turn(
        db, user_id=theirs.id, conversation_id=kept.conversation_id, message="x"
    )
    assert stolen is None
    assert await _messages(db, kept.conversation_id) == ["Hi"]
