"""A run as its readers find it stored: its owner and status, its events (kept 24 h), and
its close by a process that took over a dead one's run."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import bindparam, delete, func, select, update
from sqlalchemy.orm import Session

from controlcenter.chat.models import (
    ADD_EVENTS,
    RUNNING,
    ChatEventRow,
    ChatRun,
)
from controlcenter.chat.run.writer import StoredEvent
from controlcenter.chat.signals import EVENTS_CHANNEL
from controlcenter.common.logs import get_logger
from controlcenter.db import Database, utcnow
from controlcenter.db.notifications import notify

log = get_logger(__name__)


KEPT_FOR = timedelta(hours=24)


def close_run(session: Session, message_id: str, final_data: str, status: str) -> bool:
    """For a process that closes another's run (its process died), in the caller's
    transaction: appends `final_data` after the last stored event and sets `status`, if the
    run is still marked running. True when it closed it; readers tailing the run receive the
    event (notified at the commit) and end."""
    closed = session.execute(
        update(ChatRun)
        .where(ChatRun.message_id == message_id, ChatRun.status == RUNNING)
        .values(status=status)
    )
    if not closed.rowcount:  # type: ignore[attr-defined]
        return False
    last = session.scalar(
        select(func.max(ChatEventRow.n)).where(ChatEventRow.message_id == message_id)
    )
    session.execute(ADD_EVENTS.values(message_id=message_id, n=int(last or 0) + 1, data=final_data))
    notify(session, EVENTS_CHANNEL, [message_id])
    return True


async def run_owner_status(db: Database, message_id: str) -> tuple[str, str] | None:
    """(user id, status) of a run whose events are kept; None when there is none."""
    return await db.run_read(_owner_status, message_id, utcnow() - KEPT_FOR)


def _owner_status(session: Session, message_id: str, cutoff: datetime) -> tuple[str, str] | None:
    row = session.execute(
        select(ChatRun.user_id, ChatRun.status).where(
            ChatRun.message_id == message_id, ChatRun.created_at >= cutoff
        )
    ).first()
    return (row[0], row[1]) if row is not None else None


async def events_after(db: Database, message_id: str, after: int) -> list[StoredEvent]:
    return await db.run_read(_events_after, message_id, after)


# Built once: a reader reads it at each wake-up.
_EVENTS_AFTER = (
    select(ChatEventRow.n, ChatEventRow.data)
    .where(
        ChatEventRow.message_id == bindparam("message_id"),
        ChatEventRow.n > bindparam("after"),
    )
    .order_by(ChatEventRow.n)
)


def _events_after(session: Session, message_id: str, after: int) -> list[StoredEvent]:
    rows = session.execute(_EVENTS_AFTER, {"message_id": message_id, "after": after})
    return [(n, data) for n, data in rows]


async def prune(db: Database, now: datetime | None = None) -> int:
    """Forget the events of runs older than 24 h (the runs stay: their usage counts for the
    month); the number of events removed."""
    return await db.run_write(_prune, (now or utcnow()) - KEPT_FOR)


def _prune(session: Session, cutoff: datetime) -> int:
    old = select(ChatRun.message_id).where(ChatRun.created_at < cutoff)
    removed = session.execute(delete(ChatEventRow).where(ChatEventRow.message_id.in_(old)))
    return int(removed.rowcount)  # type: ignore[attr-defined]
