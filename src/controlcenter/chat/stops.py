"""A stop asked for running runs: the flag their process reads (`chat.stream.ChatRuns`) and,
on PostgreSQL, the notification that wakes it at once."""

from __future__ import annotations

from sqlalchemy import ColumnElement, update
from sqlalchemy.ext.asyncio import AsyncSession

from controlcenter.chat.models import RUNNING, ChatRun
from controlcenter.chat.signals import STOP_CHANNEL
from controlcenter.db.notifications import notify


async def ask_stop(session: AsyncSession, *where: ColumnElement[bool]) -> list[str]:
    """In the caller's transaction: the stop flag set on the runs still running that match
    `where`, their processes notified at the commit. Their message ids (none when none ran)."""
    asked = await session.execute(
        update(ChatRun)
        .where(ChatRun.status == RUNNING, *where)
        .values(stop_requested=True)
        .returning(ChatRun.message_id)
    )
    stopped = list(asked.scalars())
    await notify(session, STOP_CHANNEL, stopped)
    return stopped
