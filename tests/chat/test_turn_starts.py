"""A turn's start (`start_turn`): a new or continued conversation, its history, the user's
message and the run with message_start, in one write; None, with nothing saved, for a
conversation that is not the caller's. On both databases."""

from __future__ import annotations

from sqlalchemy import delete, func, select

from controlcenter.chat.models import RUNNING, ConversationRow, Message
from controlcenter.chat.run.start import StartedTurn, StoredText, start_turn
from controlcenter.chat.run.stored import events_after, run_owner_status
from controlcenter.db import Database
from tests.conftest import UserFactory
from tests.dbtools import reading, writing


async def _messages(db: Database, conversation_id: str) -> list[str]:
    async with reading(db) as session:
        rows = await session.scalars(
            select(Message.content)
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.seq)
        )
        return list(rows)


async def _start(
    db: Database, user_id: str, conversation_id: str | None, message: str, answer: str
) -> StartedTurn | None:
    return await start_turn(
        db, user_id=user_id, conversation_id=conversation_id, message=message, answer_id=answer
    )


async def test_a_turn_starts_or_continues_the_callers_conversation(
    db: Database, users: UserFactory
) -> None:
    mine, theirs = await users.create(), await users.create()
    kept = await _start(db, mine.id, None, "Earlier", "msg_1_startfirst")
    other = await _start(db, theirs.id, None, "Theirs", "msg_1_starttheirs")
    assert kept is not None and kept.history == ()
    assert other is not None
    again = await _start(db, mine.id, kept.conversation_id, "Again", "msg_1_startagain")
    assert again is not None and again.conversation_id == kept.conversation_id
    assert again.history == (StoredText("user", "Earlier"),)
    once = await _start(db, mine.id, kept.conversation_id, "Once more", "msg_1_startonce")
    assert once is not None
    assert once.history == (StoredText("user", "Earlier"), StoredText("user", "Again"))
    assert await _start(db, mine.id, other.conversation_id, "x", "msg_1_startnotmine") is None
    assert await _start(db, mine.id, "", "x", "msg_1_startnotanid") is None  # names none
    assert await _messages(db, kept.conversation_id) == ["Earlier", "Again", "Once more"]
    assert await _messages(db, other.conversation_id) == ["Theirs"]
    async with reading(db) as session:
        continued = await session.get(ConversationRow, kept.conversation_id)
        titles = await session.scalars(
            select(ConversationRow.title).where(ConversationRow.user_id == mine.id)
        )
        assert set(titles) == {"Earlier"}
    assert continued is not None and continued.updated_at > continued.created_at
    for answer, turn in (("msg_1_startagain", again), ("msg_1_startonce", once)):
        stored = await events_after(db, answer, 0)
        assert [n for n, _ in stored] == [1] and turn.conversation_id in stored[0][1]
        assert await run_owner_status(db, answer) == (mine.id, RUNNING)
    for refused in ("msg_1_startnotmine", "msg_1_startnotanid"):
        assert await run_owner_status(db, refused) is None


async def test_a_start_the_database_refuses_saves_nothing(db: Database, users: UserFactory) -> None:
    user = await users.create()
    assert await _start(db, user.id, None, "x", "msg_1_dup") is not None
    async with reading(db) as session:
        before = await session.scalar(select(func.count()).select_from(Message))
    try:
        await _start(db, user.id, None, "refused", "msg_1_dup")  # the run's id is taken
    except Exception as exc:
        assert "unique" in str(exc).lower() or "duplicate" in str(exc).lower()
    else:
        raise AssertionError("a taken run id was accepted")
    async with reading(db) as session:
        after = await session.scalar(select(func.count()).select_from(Message))
    assert after == before


async def test_a_conversation_without_messages_is_continued_with_an_empty_history(
    db: Database, users: UserFactory
) -> None:
    """Its own, with no stored message (one statement reads ownership and history: no row is
    "not yours", a row of NULLs is "yours, empty"), and another user's is not found."""
    mine, theirs = await users.create(), await users.create()
    kept = await _start(db, mine.id, None, "Gone", "msg_1_gone1")
    assert kept is not None
    async with writing(db) as session:
        await session.execute(
            delete(Message).where(Message.conversation_id == kept.conversation_id)
        )
    again = await _start(db, mine.id, kept.conversation_id, "Hi", "msg_1_gone2")
    assert again is not None and again.history == ()
    assert await _messages(db, kept.conversation_id) == ["Hi"]
    assert await _start(db, theirs.id, kept.conversation_id, "x", "msg_1_gone3") is None
    assert await _messages(db, kept.conversation_id) == ["Hi"]
