"""The caller's conversations as the conversation endpoints read and delete them. A chat turn
writes them through `chat.store`; this module returns rows, and `chat.schemas` shapes them."""

from __future__ import annotations

from sqlalchemy import and_, delete, exists, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from controlcenter.chat.models import ConversationRow, Message
from controlcenter.db import Database, utcnow
from controlcenter.db.text_match import lowered
from controlcenter.web.pagination import DEFAULT_LIMIT, Cursor
from controlcenter.web.validation import text_problem


async def list_conversations(
    db: Database,
    user_id: str,
    *,
    limit: int = DEFAULT_LIMIT,
    after: Cursor | None = None,
    containing: str | None = None,
) -> tuple[list[ConversationRow], str | None]:
    """A page of the caller's conversations, newest first, and the cursor of the next page
    (None after the last). `containing`: only those whose title or a message's text holds it,
    whatever the case (its `%` and `_` are plain characters)."""
    query = select(ConversationRow).where(ConversationRow.user_id == user_id)
    if containing:
        needle = containing.lower()
        in_messages = exists().where(
            Message.conversation_id == ConversationRow.id,
            lowered(Message.content).contains(needle, autoescape=True),
        )
        query = query.where(
            or_(lowered(ConversationRow.title).contains(needle, autoescape=True), in_messages)
        )
    if after is not None:
        query = query.where(
            or_(
                ConversationRow.created_at < after.created_at,
                and_(ConversationRow.created_at == after.created_at, ConversationRow.id < after.id),
            )
        )
    query = query.order_by(ConversationRow.created_at.desc(), ConversationRow.id.desc())
    async with db.read() as session:
        rows = list(await session.scalars(query.limit(limit + 1)))
    page = rows[:limit]
    more = len(rows) > limit
    next_cursor = Cursor(page[-1].created_at, page[-1].id).encode() if more else None
    return page, next_cursor


async def get_conversation(
    db: Database, user_id: str, conversation_id: str
) -> tuple[ConversationRow, list[Message]] | None:
    """The caller's conversation and its messages, oldest first; None when not theirs."""
    async with db.read() as session:
        conversation = await _owned(session, user_id, conversation_id)
        if conversation is None:
            return None
        messages = await session.scalars(
            select(Message).where(Message.conversation_id == conversation.id).order_by(Message.seq)
        )
        return conversation, list(messages)


async def rename_conversation(
    db: Database, user_id: str, conversation_id: str, title: str
) -> ConversationRow | None:
    """The caller's conversation with its new title; None when not theirs."""
    async with db.write() as session:
        conversation = await _owned(session, user_id, conversation_id)
        if conversation is None:
            return None
        conversation.title = title
        conversation.updated_at = utcnow()
        return conversation


async def delete_conversation(db: Database, user_id: str, conversation_id: str) -> bool:
    async with db.write() as session:
        conversation = await _owned(session, user_id, conversation_id)
        if conversation is None:
            return False
        # Explicitly, not only by the foreign key's cascade: SQLite enforces it per connection.
        await session.execute(delete(Message).where(Message.conversation_id == conversation.id))
        await session.delete(conversation)
        return True


async def _owned(
    session: AsyncSession, user_id: str, conversation_id: str
) -> ConversationRow | None:
    # Another user's conversation is indistinguishable from a missing one.
    if text_problem(conversation_id) is not None:
        return None  # no id holds NUL or a lone surrogate, and PostgreSQL refuses the query
    return await session.scalar(
        select(ConversationRow).where(
            ConversationRow.id == conversation_id, ConversationRow.user_id == user_id
        )
    )
