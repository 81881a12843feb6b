"""A turn's start, in one write: the conversation (created or continued), the user's
message, the run's row with its first event (`message_start`) and its liveness row, so a
client holding a message id always finds the message, and a process that dies at any moment
after it leaves a run that another process closes."""

from __future__ import annotations

import secrets
import string
import time
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from controlcenter.chat.conversations import LAST_ANSWER, revise_last_turn
from controlcenter.chat.events import event_data, message_start
from controlcenter.chat.locks import hold_owned
from controlcenter.chat.models import (
    ADD_EVENTS,
    CONVERSATIONS_TABLE,
    RUNNING,
    RUNNING_TABLE,
    RUNS_TABLE,
    USER,
    Message,
)
from controlcenter.chat.run.answer import ADD_MESSAGES, TOUCH
from controlcenter.chat.signals import EVENTS_CHANNEL
from controlcenter.common.logs import get_logger
from controlcenter.db import Database, new_id, utcnow
from controlcenter.db.notifications import notify

log = get_logger(__name__)


TITLE_LENGTH = 100  # characters (code points), not bytes
# Built once, run with each turn's values.
_ADD_CONVERSATION = insert(CONVERSATIONS_TABLE)
_ADD_RUN = insert(RUNS_TABLE)
_ADD_RUNNING = insert(RUNNING_TABLE)
_BASE36 = string.digits + string.ascii_lowercase


def new_message_id() -> str:
    """`msg_<epoch ms>_<9 random base36 chars>`."""
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
    message: str = ""  # the user's message the run answers


async def start_turn(
    db: Database,
    *,
    user_id: str,
    conversation_id: str | None,
    message: str,
    answer_id: str,
    owner: str | None = None,
    replace: str | None = None,
) -> StartedTurn | None:
    """In one write: the conversation (created when `conversation_id` is None, else continued
    when it is the caller's), the user's message, the run of the answer `answer_id` with its
    first event, `message_start`, and, with `owner` (the process's `chat.liveness` id), the
    answer's liveness row. None when the conversation is not the caller's (another user's
    conversation is indistinguishable from a missing one): nothing is saved then.

    `replace` (a continued conversation only; `conversations.revise_last_turn`): its last
    answer (`lastAnswer`: the last user message is answered again, not saved again) or its
    last user message with its answer (`lastMessage`: `message` takes its place) are deleted
    first, in the same write. Raises TurnRefusedError (nothing saved) when an answer of the
    conversation still runs or it has no message to answer again."""
    return await db.run_write(
        _start,
        user_id=user_id,
        conversation_id=conversation_id,
        message=message,
        answer_id=answer_id,
        owner=owner,
        replace=replace,
        now=utcnow(),
    )


def _start(
    session: Session,
    *,
    user_id: str,
    conversation_id: str | None,
    message: str,
    answer_id: str,
    owner: str | None,
    replace: str | None,
    now: datetime,
) -> StartedTurn | None:
    """`start_turn`'s write."""
    save_message = True
    if conversation_id is None:
        conversation_id = new_id()
        history: tuple[StoredText, ...] = ()
        title = message[:TITLE_LENGTH]
        session.execute(
            _ADD_CONVERSATION,
            {
                "id": conversation_id,
                "user_id": user_id,
                "title": title,
                "created_at": now,
                "updated_at": now,
            },
        )
    else:
        # First, as every writer of a conversation's rows does (`chat.locks`).
        if hold_owned(session, user_id, conversation_id) is None:
            return None
        session.execute(TOUCH, {"conversation": conversation_id, "now": now})
        if replace is not None:
            message = revise_last_turn(session, conversation_id, replace, message, TITLE_LENGTH)
        history = _history(session, conversation_id)
        if replace == LAST_ANSWER:
            history = history[:-1]  # the message answered again, already saved
            save_message = False
    if save_message:
        session.execute(
            ADD_MESSAGES,
            {
                "id": new_message_id(),
                "conversation_id": conversation_id,
                "role": USER,
                "content": message,
                "created_at": now,
                "interrupted": False,
            },
        )
    session.execute(
        _ADD_RUN,
        {
            "message_id": answer_id,
            "user_id": user_id,
            "conversation_id": conversation_id,
            "status": RUNNING,
            "created_at": now,
            "stop_requested": False,
            "input_tokens": 0,
            "output_tokens": 0,
            "provider_calls": 0,
            "tool_calls": 0,
        },
    )
    first = event_data(message_start(conversation_id, answer_id))
    session.execute(ADD_EVENTS, {"message_id": answer_id, "n": 1, "data": first})
    if owner is not None:
        # With the run, not after it: a process that dies at any moment after this commit
        # leaves a row whose heartbeat goes stale, and another process closes the run.
        session.execute(
            _ADD_RUNNING, {"message_id": answer_id, "owner": owner, "heartbeat_at": now}
        )
    notify(session, EVENTS_CHANNEL, [answer_id])
    return StartedTurn(conversation_id=conversation_id, history=history, message=message)


def _history(session: Session, conversation_id: str) -> tuple[StoredText, ...]:
    """The stored messages of the conversation, oldest first, empty ones left out (the APIs
    reject empty text)."""
    rows = session.execute(
        select(Message.role, Message.content)
        .where(Message.conversation_id == conversation_id, Message.content != "")
        .order_by(Message.seq)
    )
    return tuple(StoredText(role, content) for role, content in rows)
