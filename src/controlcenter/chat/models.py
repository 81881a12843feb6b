"""Conversations and their messages (SPEC 2.4)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Integer, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from controlcenter.db import Base, UTCDateTime, new_id, utcnow


class Conversation(Base):
    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    title: Mapped[str] = mapped_column(String(400))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class Message(Base):
    __tablename__ = "messages"

    # A surrogate sequence keeps "oldest first" exact when two timestamps tie.
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64), unique=True)
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[str] = mapped_column(String(20))
    content: Mapped[str] = mapped_column(Text)
    tool_calls: Mapped[list[Any] | None] = mapped_column(JSON, default=None)
    tool_results: Mapped[list[Any] | None] = mapped_column(JSON, default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # Closed by another process after its own died mid-answer (CONTRACT 13, chat/liveness.py).
    interrupted: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class RunningMessage(Base):
    """An assistant message being written, and the process writing it (its heartbeat)."""

    __tablename__ = "running_messages"

    message_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    owner: Mapped[str] = mapped_column(String(32), index=True)
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    content: Mapped[str] = mapped_column(Text, default="")
    tool_calls: Mapped[list[Any] | None] = mapped_column(JSON, default=None)
    tool_results: Mapped[list[Any] | None] = mapped_column(JSON, default=None)
