"""An answer's row: built from what its events said (`chat.fold`), and saved, by its run at
its end (the event writer's batch) or by the process that closes a dead one's run."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.orm import Session

from controlcenter.chat.fold import Fold
from controlcenter.chat.models import (
    ASSISTANT,
    CONVERSATIONS_TABLE,
    MESSAGES_TABLE,
    Message,
)
from controlcenter.common.logs import get_logger
from controlcenter.db import utcnow

log = get_logger(__name__)


TOUCH = (
    update(CONVERSATIONS_TABLE)
    .where(CONVERSATIONS_TABLE.c.id == bindparam("conversation"))
    .values(updated_at=bindparam("now"))
)
# Built once, run with each write's values.
ADD_MESSAGES = insert(MESSAGES_TABLE)
_CLOSED_COPIES = select(Message.id).where(
    Message.id.in_(bindparam("ids", expanding=True)), Message.interrupted.is_(True)
)


def assistant_message(
    conversation_id: str,
    message_id: str,
    answer: Fold,
    *,
    usage: dict[str, int] | None = None,
    interrupted: bool = False,
    created_at: datetime | None = None,
) -> Message:
    """The answer's row as its events made it (`chat.fold`), not saved yet: a run saves it
    with its end (`RunRecord.finish`), another process when it closes the run of a dead one
    (`interrupted`)."""
    return Message(
        id=message_id,
        conversation_id=conversation_id,
        role=ASSISTANT,
        content=answer.content,
        tool_calls=list(answer.tool_calls) or None,
        tool_results=list(answer.tool_results) or None,
        parts=[dict(part) for part in answer.parts],
        usage=usage,
        created_at=created_at or utcnow(),
        interrupted=interrupted,
    )


def save_answers(session: Session, answers: Sequence[Message]) -> None:
    """Inserted, their conversations' rows held by the caller (an answer whose conversation
    was deleted meanwhile is not among them); an answer that another process closed as
    interrupted meanwhile (it took this process for dead, `chat.liveness`) replaces that copy
    instead."""
    if not answers:
        return
    ids = [answer.id for answer in answers]
    copies = set(session.scalars(_CLOSED_COPIES, {"ids": ids}))
    new = [_answer_row(answer) for answer in answers if answer.id not in copies]
    if new:
        session.execute(ADD_MESSAGES, new)
    for answer in answers:
        if answer.id in copies:
            log.warning("chat answer closed as interrupted by another process, then finished")
            session.execute(
                update(MESSAGES_TABLE)
                .where(MESSAGES_TABLE.c.id == answer.id)
                .values(
                    content=answer.content,
                    tool_calls=answer.tool_calls,
                    tool_results=answer.tool_results,
                    parts=answer.parts,
                    usage=answer.usage,
                    interrupted=False,
                )
            )
    # Sorted: two answers of one conversation ending together leave it the later's time.
    touched = sorted((answer.created_at, answer.conversation_id) for answer in answers)
    session.execute(TOUCH, [{"conversation": c, "now": when} for when, c in touched])


def save_interrupted(session: Session, answer: Message) -> bool:
    """For a process that closes another's run (its process died), in the caller's
    transaction, the conversation's row held (`chat.locks`): the answer so far saved, its
    conversation touched. False when the conversation was deleted while the answer ran."""
    touched = session.execute(
        TOUCH, {"conversation": answer.conversation_id, "now": answer.created_at}
    )
    if not touched.rowcount:  # type: ignore[attr-defined]
        return False
    session.execute(ADD_MESSAGES, _answer_row(answer))
    return True


def _answer_row(answer: Message) -> dict[str, Any]:
    return {
        "id": answer.id,
        "conversation_id": answer.conversation_id,
        "role": answer.role,
        "content": answer.content,
        "tool_calls": answer.tool_calls,
        "tool_results": answer.tool_results,
        "parts": answer.parts,
        "usage": answer.usage,
        "created_at": answer.created_at,
        "interrupted": answer.interrupted,
    }
