"""The caller's conversations as the conversation endpoints read, rename and delete them, and
the cut a chat turn makes when it answers the last message again. A chat turn writes them
through `chat.store`; this module returns rows, and `chat.schemas` shapes them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, exists, or_, select, update
from sqlalchemy.orm import Session

from controlcenter.chat.locks import hold_owned
from controlcenter.chat.models import RUNNING, ChatRun, ConversationRow, Message
from controlcenter.chat.run.commands import ask_stop
from controlcenter.db import Database, utcnow
from controlcenter.db.pagination import newest_first
from controlcenter.db.text_match import lowered


async def list_conversations(
    db: Database,
    user_id: str,
    *,
    limit: int,
    after: tuple[datetime, str] | None = None,
    containing: str | None = None,
) -> tuple[list[ConversationRow], bool]:
    """A page of the caller's conversations, newest first, after the conversation `after`
    names (its creation time and id), and whether more follow. `containing`: only those
    whose title or a message's text holds it, whatever the case (its `%` and `_` are plain
    characters)."""
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
    return await db.run_read(
        newest_first,
        query,
        ConversationRow.created_at,
        ConversationRow.id,
        limit=limit,
        after=after,
    )


async def get_conversation(
    db: Database, user_id: str, conversation_id: str
) -> tuple[ConversationRow, list[Message]] | None:
    """The caller's conversation and its messages, oldest first; None when not theirs."""
    return await db.run_read(_conversation_with_messages, user_id, conversation_id)


async def rename_conversation(
    db: Database, user_id: str, conversation_id: str, title: str
) -> ConversationRow | None:
    """The caller's conversation with its new title; None when not theirs."""
    return await db.run_write(_rename, user_id, conversation_id, title)


async def delete_conversation(db: Database, user_id: str, conversation_id: str) -> bool:
    """Its answers still running are stopped, as the stop endpoint stops them (they end with
    an `error` event saying the conversation was deleted)."""
    return await db.run_write(_delete, user_id, conversation_id)


def _conversation_with_messages(
    session: Session, user_id: str, conversation_id: str
) -> tuple[ConversationRow, list[Message]] | None:
    conversation = _owned(session, user_id, conversation_id)
    if conversation is None:
        return None
    messages = session.scalars(
        select(Message).where(Message.conversation_id == conversation.id).order_by(Message.seq)
    )
    return conversation, list(messages)


def _rename(
    session: Session, user_id: str, conversation_id: str, title: str
) -> ConversationRow | None:
    conversation = hold_owned(session, user_id, conversation_id)
    if conversation is None:
        return None
    conversation.title = title
    conversation.updated_at = utcnow()
    return conversation


def _delete(session: Session, user_id: str, conversation_id: str) -> bool:
    # Its row first, as every writer of a conversation's rows takes it (`chat.locks`).
    conversation = hold_owned(session, user_id, conversation_id, deleting=True)
    if conversation is None:
        return False
    stop_conversation_runs(session, conversation.id)
    session.delete(conversation)  # its messages by the declared cascade
    return True


def _owned(session: Session, user_id: str, conversation_id: str) -> ConversationRow | None:
    # Another user's conversation is indistinguishable from a missing one.
    return session.scalar(
        select(ConversationRow).where(
            ConversationRow.id == conversation_id, ConversationRow.user_id == user_id
        )
    )


# What a turn may replace (the chat body's `replace`).
LAST_ANSWER = "lastAnswer"  # the last user message is answered again
LAST_MESSAGE = "lastMessage"  # the last user message is replaced by the turn's, then answered
REPLACEABLE = (LAST_ANSWER, LAST_MESSAGE)
ANSWER_RUNNING = "An answer is still running in this conversation"
NOTHING_TO_REPLACE = "The conversation has no message to answer again"


class TurnRefusedError(Exception):
    """The turn cannot replace what it asked to; the message is the stream's `error`."""


def revise_last_turn(
    session: Session,
    conversation_id: str,
    replace: str,
    message: str,
    title_length: int,
) -> str:
    """In the turn's write, on the caller's conversation: the messages after its last user
    message deleted (`LAST_ANSWER`), or that message too (`LAST_MESSAGE`, `message` taking its
    place; the title follows when it was that first message's own). The user message the
    turn answers. Raises TurnRefusedError, before any change, while an answer of the
    conversation still runs (it would land after the cut) or when it has no user message."""
    if _answer_running(session, conversation_id):
        raise TurnRefusedError(ANSWER_RUNNING)
    in_conversation = Message.conversation_id == conversation_id
    last = session.execute(
        select(Message.seq, Message.content)
        .where(in_conversation, Message.role == "user")
        .order_by(Message.seq.desc())
        .limit(1)
    ).first()
    if last is None:
        raise TurnRefusedError(NOTHING_TO_REPLACE)
    seq, asked = last
    if replace == LAST_ANSWER:
        session.execute(delete(Message).where(in_conversation, Message.seq > seq))
        return str(asked)
    session.execute(delete(Message).where(in_conversation, Message.seq >= seq))
    first = session.scalar(select(Message.seq).where(in_conversation).limit(1))
    if first is None:  # it was the first message: a title taken from it follows it
        session.execute(
            update(ConversationRow)
            .where(
                ConversationRow.id == conversation_id,
                ConversationRow.title == asked[:title_length],
            )
            .values(title=message[:title_length])
        )
    return message


def _answer_running(session: Session, conversation_id: str) -> bool:
    """Whether a run answers in this conversation now."""
    running = session.scalar(
        select(ChatRun.message_id)
        .where(ChatRun.conversation_id == conversation_id, ChatRun.status == RUNNING)
        .limit(1)
    )
    return running is not None


def stop_conversation_runs(session: Session, conversation_id: str) -> list[str]:
    """In the caller's transaction (the conversation's deletion, its row held): a stop asked
    for each run of the conversation still running (`stops.ask_stop`, as the stop endpoint
    asks it); their message ids."""
    return ask_stop(session, ChatRun.conversation_id == conversation_id)
