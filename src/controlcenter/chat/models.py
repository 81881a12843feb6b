"""Conversations and their messages."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    false,
    insert,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from controlcenter.db import Base, UTCDateTime, new_id, utcnow


class ConversationRow(Base):
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
    # {inputTokens, outputTokens, providerCalls} of an assistant message.
    usage: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    # An assistant message's text parts and tool calls in the order they happened
    # (`chat.fold`); None for user messages and for answers stored before it was kept.
    parts: Mapped[list[Any] | None] = mapped_column(JSON, default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # Closed by another process after its own died mid-answer (chat/liveness.py).
    interrupted: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


USER = "user"  # a message's role
ASSISTANT = "assistant"
# A run's status: running, then how it ended.
RUNNING = "running"
DONE = "done"
STOPPED = "stopped"
FAILED = "failed"
INTERRUPTED = "interrupted"  # closed by another process after its own died
# An approval's status: pending, then its answer.
PENDING = "pending"
APPROVED = "approved"
DENIED = "denied"
EXPIRED = "expired"


# The condition of `ix_chat_runs_stops_asked`, written the same in the poll's query: SQLite uses
# a partial index only for a query whose WHERE holds the index's terms as written.
STOPS_ASKED = "stop_requested AND status = 'running'"
# The condition of `ix_chat_runs_running`, written the same in `chat.liveness`'s query. Its
# second term, true of every row, keeps SQLite's stop poll (whose WHERE holds the first) on
# its own smaller index: SQLite uses a partial index only when the query states all its terms.
RUNNING_NOW = "status = 'running' AND created_at IS NOT NULL"


class ChatRun(Base):
    """One assistant message's run: who owns it, whether it still runs, whether
    a stop was asked for (from any process), and what it used."""

    __tablename__ = "chat_runs"
    # SQLite's processes poll for stops (nothing notifies them): this index holds only the
    # running runs a stop was asked for, so a poll reads those few rows whatever the number
    # of runs (an IN list of every running id grows with the streams open).
    __table_args__ = (
        Index(
            "ix_chat_runs_stops_asked",
            "message_id",
            sqlite_where=text(STOPS_ASKED),
            postgresql_where=text(STOPS_ASKED),
        ),
        # The few runs that run now, by age: every process looks through them each beat
        # for runs that lost their liveness row (the table keeps every run, for usage).
        Index(
            "ix_chat_runs_running",
            "created_at",
            sqlite_where=text(RUNNING_NOW),
            postgresql_where=text(RUNNING_NOW),
        ),
    )

    message_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # The conversation it answers in. No foreign key: a run outlives its conversation (its
    # usage counts for the month), and a conversation's deletion writes none of its runs
    # but those it stops. None for runs begun before it was kept.
    conversation_id: Mapped[str | None] = mapped_column(String(36), default=None, index=True)
    status: Mapped[str] = mapped_column(String(20))
    stop_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    # The run's usage, kept after its events are pruned: the monthly quota and usage report.
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    provider_calls: Mapped[int] = mapped_column(Integer, default=0)
    tool_calls: Mapped[int] = mapped_column(Integer, default=0)


class ChatEventRow(Base):
    """One event of a run as sent (its JSON text), numbered from 1: the `n` of `id: <m>:<n>`.
    Kept 24 h."""

    __tablename__ = "chat_events"

    message_id: Mapped[str] = mapped_column(
        ForeignKey("chat_runs.message_id", ondelete="CASCADE"), primary_key=True
    )
    n: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    data: Mapped[str] = mapped_column(Text)


class ChatApproval(Base):
    """A call to a tool that writes, waiting for the user's answer: `pending`,
    then `approved`, `denied` or `expired`; answered from any process."""

    __tablename__ = "chat_approvals"

    message_id: Mapped[str] = mapped_column(
        ForeignKey("chat_runs.message_id", ondelete="CASCADE"), primary_key=True
    )
    tool_call_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    status: Mapped[str] = mapped_column(String(20))


class RunningMessage(Base):
    """An assistant message being written: the process writing it and its heartbeat. What
    the answer has so far is its stored events (`chat_events`), nothing else."""

    __tablename__ = "running_messages"

    message_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(32), index=True)
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


# The tables as SQLAlchemy Core handles, for the statements the chat writes in Core.
CONVERSATIONS_TABLE = cast(Table, ConversationRow.__table__)
MESSAGES_TABLE = cast(Table, Message.__table__)
RUNS_TABLE = cast(Table, ChatRun.__table__)
EVENTS_TABLE = cast(Table, ChatEventRow.__table__)
RUNNING_TABLE = cast(Table, RunningMessage.__table__)
# A run's events, one statement for one row or many (executemany), built once.
ADD_EVENTS = insert(EVENTS_TABLE)
