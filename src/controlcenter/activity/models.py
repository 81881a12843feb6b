"""The ledger's table: one row per tool call that writes, and one per undo."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from controlcenter.db import Base, UTCDateTime, new_id, utcnow

# `status`: what is stored. The API's `state` names `pending` and `undoing` `unknown`: a row
# still in either after its call ended belongs to a process that died mid-call.
PENDING = "pending"
DONE = "done"
FAILED = "failed"
UNDOING = "undoing"
UNDONE = "undone"


class ActivityEntry(Base):
    __tablename__ = "activity_entries"
    __table_args__ = (
        # The owner's list, newest first (the keyset's order).
        Index("ix_activity_entries_user_created", "user_id", "created_at", "id"),
        Index("ix_activity_entries_created", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    # Kept as long as the conversation the write was made in.
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    message_id: Mapped[str | None] = mapped_column(String(64), default=None)
    tool_call_id: Mapped[str | None] = mapped_column(String(200), default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    tool: Mapped[str] = mapped_column(String(200))
    title: Mapped[str] = mapped_column(String(400))
    summary: Mapped[str] = mapped_column(Text, default="")
    arguments: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(20))
    # The object's state read just before the write (built-in updates), None when not read.
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    # The tool's result on success (what a create made), its error on failure.
    result: Mapped[Any] = mapped_column(JSON, nullable=True, default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    # An undo's entry names the entry it undid.
    undo_of: Mapped[str | None] = mapped_column(
        ForeignKey("activity_entries.id", ondelete="CASCADE"), default=None, index=True
    )
