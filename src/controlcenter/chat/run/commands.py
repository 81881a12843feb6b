"""What a user asks of a run from any request, in any process: a stop, an approval's answer.

Each is stored (every process and instance shares it through the database), notified to the
run's process on PostgreSQL, and told at once to the run when it runs in this process
(`Signals.stop`, `Signals.poke`); on SQLite a stop marks the stop flags' topic changed, and the
other processes, seeing its stamp move, read the flags (`Signals`), while their runs read
their approvals again.
"""

from __future__ import annotations

from enum import Enum

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session

from controlcenter.chat.models import PENDING, RUNNING, ChatApproval, ChatRun
from controlcenter.chat.signals import APPROVAL_CHANNEL, STOP_CHANNEL, STOPS, Signals
from controlcenter.db import Database
from controlcenter.db.changes import mark_changed
from controlcenter.db.notifications import notify


class ApprovalAnswer(Enum):
    """What an approval's answer met."""

    DONE = "done"
    CONFLICT = "conflict"
    NOT_FOUND = "not_found"


class StopAnswer(Enum):
    ASKED = "asked"
    NOT_RUNNING = "not_running"
    NOT_FOUND = "not_found"


async def request_stop(db: Database, signals: Signals, message_id: str, user_id: str) -> StopAnswer:
    """The run's stop flag set, for its process wherever it runs; at once when it runs here."""
    answer = await db.run_write(_ask_own_stop, message_id, user_id)
    if answer is StopAnswer.ASKED:
        signals.stop(message_id)
    return answer


def _ask_own_stop(session: Session, message_id: str, user_id: str) -> StopAnswer:
    """The stop asked of the user's run: ASKED, or NOT_RUNNING (theirs, ended) or NOT_FOUND
    (no such run of theirs)."""
    if ask_stop(session, ChatRun.message_id == message_id, ChatRun.user_id == user_id):
        return StopAnswer.ASKED
    owner = session.scalar(select(ChatRun.user_id).where(ChatRun.message_id == message_id))
    return StopAnswer.NOT_RUNNING if owner == user_id else StopAnswer.NOT_FOUND


def ask_stop(session: Session, *where: ColumnElement[bool]) -> list[str]:
    """In the caller's transaction: the stop flag set on the runs still running that match
    `where`, their processes notified at the commit. Their message ids (none when none ran)."""
    asked = session.execute(
        update(ChatRun)
        .where(ChatRun.status == RUNNING, *where)
        .values(stop_requested=True)
        .returning(ChatRun.message_id)
    )
    stopped = list(asked.scalars())
    notify(session, STOP_CHANNEL, stopped)
    if stopped and session.get_bind().dialect.name == "sqlite":  # no notifications there
        mark_changed(session, STOPS)
    return stopped


async def answer_approval(
    db: Database, signals: Signals, message_id: str, tool_call_id: str, user_id: str, status: str
) -> ApprovalAnswer:
    """The user's answer to a pending approval: DONE, CONFLICT (already answered or timed
    out) or NOT_FOUND (no such call of one of the user's messages). Its run reads it at once
    when it runs here."""
    answer = await db.run_write(_answer, message_id, tool_call_id, user_id, status)
    if answer is ApprovalAnswer.DONE:
        signals.poke(message_id)
    return answer


def _answer(
    session: Session, message_id: str, tool_call_id: str, user_id: str, status: str
) -> ApprovalAnswer:
    """The pending approval of the user's call answered, its run's process notified at the
    commit."""
    owned = select(ChatRun.message_id).where(
        ChatRun.message_id == message_id, ChatRun.user_id == user_id
    )
    call = (ChatApproval.message_id.in_(owned), ChatApproval.tool_call_id == tool_call_id)
    answered = session.execute(
        update(ChatApproval).where(*call, ChatApproval.status == PENDING).values(status=status)
    )
    if not answered.rowcount:  # type: ignore[attr-defined]
        was = session.scalar(select(ChatApproval.status).where(*call))
        return ApprovalAnswer.NOT_FOUND if was is None else ApprovalAnswer.CONFLICT
    notify(session, APPROVAL_CHANNEL, [message_id])
    return ApprovalAnswer.DONE
