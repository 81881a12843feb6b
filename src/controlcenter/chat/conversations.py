"""Conversations and messages in the database (SPEC 2.4, 4.2 steps 1-3 and 9; CONTRACT 2).

Storage only: it returns rows; `chat.schemas` shapes them as JSON, the agent as turns."""

from __future__ import annotations

import secrets
import string
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from controlcenter.chat import run_store
from controlcenter.chat.events import event_data, message_start
from controlcenter.chat.models import Conversation, Message
from controlcenter.common.logs import get_logger
from controlcenter.db import Database, new_id, refused_row, utcnow
from controlcenter.db.group_commit import GroupCommit
from controlcenter.web.pagination import DEFAULT_LIMIT, Cursor
from controlcenter.web.validation import text_problem

TITLE_LENGTH = 100  # SPEC 8: characters (code points), not bytes
USER = "user"
ASSISTANT = "assistant"
_BASE36 = string.digits + string.ascii_lowercase

log = get_logger(__name__)


def new_message_id() -> str:
    """CONTRACT 5: `msg_<epoch ms>_<9 random base36 chars>`."""
    suffix = "".join(secrets.choice(_BASE36) for _ in range(9))
    return f"msg_{int(time.time() * 1000)}_{suffix}"


@dataclass(frozen=True)
class StoredText:
    """One stored message as the model reads it again."""

    role: str
    content: str


@dataclass(frozen=True)
class StartedTurn:
    conversation_id: str
    history: tuple[StoredText, ...]  # the stored messages before this one, empty ones left out


@dataclass(frozen=True)
class TurnStart:
    """What `start_turn` is asked."""

    user_id: str
    conversation_id: Any  # the request's raw value
    message: str
    answer_id: str | None = None


async def start_turn(
    db: Database,
    *,
    user_id: str,
    conversation_id: Any,
    message: str,
    answer_id: str | None = None,
) -> StartedTurn | None:
    """Steps 1-3 in one write: create or load the conversation, then save the user message;
    with them, the run of the answer `answer_id` (if given) with its first event,
    message_start (CONTRACT 11), so that starting a chat costs one write, not two. None when
    the conversation is not the caller's (nothing is saved then).

    `conversation_id` is the request's raw value: absent (None) creates a conversation; any
    other value that does not name one of the caller's conversations is "not found".
    """
    async with db.write_driver() as driver:
        (started,) = await _start_all(
            db, driver, [TurnStart(user_id, conversation_id, message, answer_id)]
        )
        return started


class TurnStarts:
    """`start_turn` for the chats of a process, many in one write when they start together
    (`db.group_commit`): 10,000 chats arriving at once took their turns at the database one
    after the other, ~9 ms each on SQLite's one writer."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._grouped: GroupCommit[TurnStart, StartedTurn | None] = GroupCommit(
            db, partial(_start_all, db), "chat-turn-starts", driver=True
        )

    async def start(self, start: TurnStart) -> StartedTurn | None:
        return await self._grouped.submit(start)


async def _start_all(
    db: Database, driver: Any, starts: Sequence[TurnStart]
) -> list[StartedTurn | None]:
    """`start_turn` for each of `starts` on the driver's connection (`Database.write_driver`,
    no session: its machinery cost a lone start more than its statements): the continued
    conversations read first, one statement each, then every row written at once
    (`run_store.insert_starts`: one statement on PostgreSQL, one per table on SQLite). On
    SQLite all of it is one transaction; on PostgreSQL each statement is its own, as each is
    under READ COMMITTED anyway (a conversation deleted between its read and the write fails
    the write on its foreign key, in one transaction or not). The rows are built anew on every
    call (a shared write that failed is tried again one start at a time)."""
    new = run_store.NewStarts()
    # The history of each conversation continued in this batch, as the next start in it reads
    # it: a conversation continued twice reads the first message as if it had committed.
    histories: dict[tuple[str, str], tuple[StoredText, ...] | None] = {}
    started: list[StartedTurn | None] = []
    for start in starts:
        conversation_id = start.conversation_id
        if conversation_id is None:
            conversation_id = new_id()
            new.conversations.append((conversation_id, start.user_id, start.message[:TITLE_LENGTH]))
            history: tuple[StoredText, ...] | None = ()
        elif not isinstance(conversation_id, str):
            history = None
        else:
            key = (start.user_id, conversation_id)
            if key not in histories:
                histories[key] = await _owned_history(db, driver, start.user_id, conversation_id)
            history = histories[key]
            if history is not None:
                new.continued.append(conversation_id)
                histories[key] = history + _stored_text(USER, start.message)
        if history is None:
            started.append(None)
            continue
        message_id = new_message_id()
        new.messages.append((message_id, conversation_id, USER, start.message))
        turn = StartedTurn(conversation_id=conversation_id, history=history)
        started.append(turn)
        if start.answer_id is not None:
            first = event_data(message_start(conversation_id, start.answer_id))
            new.runs.append(run_store.NewRun(start.answer_id, start.user_id, (1, first)))
    await run_store.insert_starts(db, driver, new)
    return started


def assistant_message(
    *,
    conversation_id: str,
    message_id: str,
    content: str,
    tool_calls: list[dict[str, Any]],
    tool_results: list[dict[str, Any]],
    usage: dict[str, int] | None = None,
) -> Message:
    """Step 9's row, not saved yet (its JSON is final: `message_complete` can be written with
    it, in the transaction that saves it)."""
    return Message(
        id=message_id,
        conversation_id=conversation_id,
        role=ASSISTANT,
        content=content,
        tool_calls=tool_calls or None,
        tool_results=tool_results or None,
        usage=usage,
        created_at=utcnow(),
        interrupted=False,
    )


_CONVERSATIONS = cast(Table, Conversation.__table__)
_TOUCH = (
    update(_CONVERSATIONS)
    .where(_CONVERSATIONS.c.id == bindparam("conversation"))
    .values(updated_at=bindparam("now"))
)


async def replace_interrupted(db: Database, row: Message) -> bool:
    """Another process took this answer's process for dead and closed it as interrupted
    (chat/liveness.py): the real end replaces that copy. False when there is no such copy
    (the refusal had another cause, and stands)."""
    async with db.write() as session:
        replaced = await session.execute(
            update(Message)
            .where(Message.id == row.id, Message.interrupted.is_(True))
            .values(
                content=row.content,
                tool_calls=row.tool_calls,
                tool_results=row.tool_results,
                usage=row.usage,
                interrupted=False,
            )
        )
        if not replaced.rowcount:  # type: ignore[attr-defined]
            return False
        await _touch(session, row.conversation_id, row.created_at)
    log.warning("chat answer closed as interrupted by another process, then finished")
    row.interrupted = False
    return True


async def save_assistant_message(db: Database, row: Message) -> Message:
    """Step 9 in a write of its own: `row` from `assistant_message`, saved (step 10 sends it
    as a ControlCenterMessage). A chat saves its answer with its run's end instead
    (`EventWriter.end_with`)."""
    try:
        async with db.write_driver() as driver:
            await run_store.write_ends(db, driver, [row], {}, {})
    except Exception as exc:
        if not refused_row(exc) or not await replace_interrupted(db, row):
            raise
    return row


async def _touch(session: AsyncSession, conversation_id: str, now: datetime) -> None:
    connection = await session.connection()
    await connection.execute(_TOUCH, {"conversation": conversation_id, "now": now})


async def list_conversations(
    db: Database, user_id: str, *, limit: int = DEFAULT_LIMIT, after: Cursor | None = None
) -> tuple[list[Conversation], str | None]:
    """A page of the caller's conversations, newest first, and the cursor of the next page
    (None after the last)."""
    query = select(Conversation).where(Conversation.user_id == user_id)
    if after is not None:
        query = query.where(
            or_(
                Conversation.created_at < after.created_at,
                and_(Conversation.created_at == after.created_at, Conversation.id < after.id),
            )
        )
    query = query.order_by(Conversation.created_at.desc(), Conversation.id.desc())
    async with db.read() as session:
        rows = list(await session.scalars(query.limit(limit + 1)))
    page = rows[:limit]
    more = len(rows) > limit
    next_cursor = Cursor(page[-1].created_at, page[-1].id).encode() if more else None
    return page, next_cursor


async def get_conversation(
    db: Database, user_id: str, conversation_id: str
) -> tuple[Conversation, list[Message]] | None:
    """The caller's conversation and its messages, oldest first; None when not theirs."""
    async with db.read() as session:
        conversation = await _owned(session, user_id, conversation_id)
        if conversation is None:
            return None
        messages = await session.scalars(
            select(Message).where(Message.conversation_id == conversation.id).order_by(Message.seq)
        )
        return conversation, list(messages)


async def delete_conversation(db: Database, user_id: str, conversation_id: str) -> bool:
    async with db.write() as session:
        conversation = await _owned(session, user_id, conversation_id)
        if conversation is None:
            return False
        # Explicitly, not only by the foreign key's cascade: SQLite enforces it per connection.
        await session.execute(delete(Message).where(Message.conversation_id == conversation.id))
        await session.delete(conversation)
        return True


# The caller's conversation and its messages, oldest first, in one statement: no row when it is
# not theirs, one row of NULLs when it has no message.
_OWNED_HISTORY = (
    "SELECT m.role, m.content FROM conversations AS c"
    " LEFT JOIN messages AS m ON m.conversation_id = c.id"
    " WHERE c.id = {id} AND c.user_id = {user} ORDER BY m.seq"
)
_SQLITE_OWNED_HISTORY = _OWNED_HISTORY.format(id="?", user="?")
_POSTGRES_OWNED_HISTORY = _OWNED_HISTORY.format(id="$1", user="$2")


async def _owned_history(
    db: Database, driver: Any, user_id: str, conversation_id: str
) -> tuple[StoredText, ...] | None:
    """The stored messages of the caller's conversation, oldest first; None when not theirs."""
    if text_problem(conversation_id) is not None:
        return None  # no id holds NUL or a lone surrogate, and PostgreSQL refuses the query
    if db.is_sqlite:
        cursor = await driver.execute(_SQLITE_OWNED_HISTORY, (conversation_id, user_id))
        try:
            rows = await cursor.fetchall()
        finally:
            await cursor.close()
    else:
        rows = await driver.fetch(_POSTGRES_OWNED_HISTORY, conversation_id, user_id)
    if not rows:
        return None
    return tuple(
        text for role, content in rows if role is not None for text in _stored_text(role, content)
    )


async def _owned(session: AsyncSession, user_id: str, conversation_id: str) -> Conversation | None:
    # Another user's conversation is indistinguishable from a missing one (CONTRACT 5).
    if text_problem(conversation_id) is not None:
        return None  # no id holds NUL or a lone surrogate, and PostgreSQL refuses the query
    return await session.scalar(
        select(Conversation).where(
            Conversation.id == conversation_id, Conversation.user_id == user_id
        )
    )


def _stored_text(role: str, content: str) -> tuple[StoredText, ...]:
    # Empty contents are left out: the APIs reject empty text (CONTRACT 5).
    return (StoredText(role, content),) if content else ()
