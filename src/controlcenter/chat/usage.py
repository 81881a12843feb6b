"""Token usage per user and month: the quota's check and the administrators'
report, both read from the chat runs (kept after their events are pruned)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import MAXYEAR, UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from controlcenter.auth.models import UserRecord
from controlcenter.chat.models import ChatRun
from controlcenter.db import Database


def month_bounds(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    if (year, month) == (MAXYEAR, 12):  # the month after is past what datetime holds
        return start, datetime.max.replace(tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return start, end


async def tokens_this_month(db: Database, user_id: str, now: datetime) -> int:
    """Input plus output tokens of the user's chats since the start of the month (UTC)."""
    start, _ = month_bounds(now.year, now.month)
    return await db.run_read(_tokens_since, user_id, start)


def _tokens_since(session: Session, user_id: str, start: datetime) -> int:
    used = session.scalar(
        select(func.coalesce(func.sum(ChatRun.input_tokens + ChatRun.output_tokens), 0)).where(
            ChatRun.user_id == user_id, ChatRun.created_at >= start
        )
    )
    return int(used or 0)


@dataclass(frozen=True)
class UsageRow:
    user_id: str
    email: str
    name: str
    input_tokens: int
    output_tokens: int
    chats: int
    tool_calls: int

    def json(self) -> dict[str, object]:
        return {
            "userId": self.user_id,
            "email": self.email,
            "name": self.name,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "chats": self.chats,
            "toolCalls": self.tool_calls,
        }


async def usage_report(db: Database, year: int, month: int) -> list[UsageRow]:
    """Every user who chatted in the month, by e-mail: tokens, chats (assistant messages
    started) and tool calls."""
    return await db.run_read(_usage_rows, *month_bounds(year, month))


def _usage_rows(session: Session, start: datetime, end: datetime) -> list[UsageRow]:
    query = (
        select(
            UserRecord.id,
            UserRecord.email,
            UserRecord.name,
            func.sum(ChatRun.input_tokens),
            func.sum(ChatRun.output_tokens),
            func.count(ChatRun.message_id),
            func.sum(ChatRun.tool_calls),
        )
        .join(ChatRun, ChatRun.user_id == UserRecord.id)
        .where(ChatRun.created_at >= start, ChatRun.created_at < end)
        .group_by(UserRecord.id, UserRecord.email, UserRecord.name)
        .order_by(UserRecord.email)
    )
    return [
        UsageRow(uid, email, name, int(tin or 0), int(tout or 0), int(n), int(tools or 0))
        for uid, email, name, tin, tout, n, tools in session.execute(query)
    ]
