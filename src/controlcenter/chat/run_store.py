"""Chat runs and their events in the database (CONTRACT 11), shared by every process and
instance: the events a reconnecting client replays, the run's status and the stop flag.

On PostgreSQL each write that readers in other processes wait for also notifies them
(`pg_notify` in the same transaction, delivered at commit); `chat.signals` listens.
Storage only: rows and plain values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, cast

from sqlalchemy import Table, delete, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Select, Update

from controlcenter.chat.models import STOPS_ASKED, ChatApproval, ChatEvent, ChatRun, Message
from controlcenter.db import Database, utcnow

RUNNING = "running"
DONE = "done"
STOPPED = "stopped"
FAILED = "failed"
INTERRUPTED = "interrupted"  # closed by another process after its own died (issue 17)
KEPT_FOR = timedelta(hours=24)
EVENTS_CHANNEL = "cc_chat_events"
STOP_CHANNEL = "cc_chat_stop"
APPROVAL_CHANNEL = "cc_chat_approval"
PENDING = "pending"
APPROVED = "approved"
DENIED = "denied"
EXPIRED = "expired"

StoredEvent = tuple[int, str]  # (n, the event's JSON text)
_CREATED_AT = cast(Table, ChatRun.__table__).c.created_at.type


@dataclass(frozen=True)
class RunUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    provider_calls: int = 0
    tool_calls: int = 0

    def json(self) -> dict[str, int]:
        """The message's `usage` field (CONTRACT 11)."""
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "providerCalls": self.provider_calls,
        }


@dataclass(frozen=True)
class RunEnd:
    status: str
    usage: RunUsage


class Answer(Enum):
    """What a stop or an approval request met."""

    DONE = "done"
    CONFLICT = "conflict"
    NOT_FOUND = "not_found"


class StopAnswer(Enum):
    ASKED = "asked"
    NOT_RUNNING = "not_running"
    NOT_FOUND = "not_found"


async def create_run(db: Database, message_id: str, user_id: str, first: StoredEvent) -> None:
    """The run's row and its first event (message_start), in one transaction."""
    async with db.write_driver() as driver:
        await insert_starts(db, driver, NewStarts(runs=[NewRun(message_id, user_id, first)]))


@dataclass(frozen=True)
class NewRun:
    message_id: str
    user_id: str
    first: StoredEvent  # message_start


@dataclass
class NewStarts:
    """What chats starting together write (`conversations.TurnStarts`): their new
    conversations, their user messages, the conversations they continue, their runs."""

    conversations: list[tuple[str, str, str]] = field(default_factory=list)  # id, user, title
    messages: list[tuple[str, str, str, str]] = field(default_factory=list)  # id, conv., role, text
    continued: list[str] = field(default_factory=list)  # conversation ids, updated now
    runs: list[NewRun] = field(default_factory=list)


async def insert_starts(db: Database, driver: Any, starts: NewStarts) -> None:
    """`starts` on the driver's connection (`Database.write_driver`'s), in its SQL, timestamped
    now, however many chats: on PostgreSQL one statement, one round trip, its own transaction;
    on SQLite one per table, in the caller's transaction."""
    if not (starts.conversations or starts.messages or starts.continued or starts.runs):
        return
    when = _timestamps(db)(utcnow())
    runs = [(run.message_id, run.user_id) for run in starts.runs]
    events = [(run.message_id, *run.first) for run in starts.runs]
    if not db.is_sqlite:
        await driver.execute(
            _POSTGRES_INSERT_STARTS, when, *_columns(starts.conversations, 3),
            *_columns(starts.messages, 4), starts.continued, RUNNING, *_columns(runs, 2),
            *_columns(events, 3)[1:], EVENTS_CHANNEL,
        )  # fmt: skip
        return
    statements = (
        (_SQLITE_INSERT_CONVERSATION, [(*row, when, when) for row in starts.conversations]),
        (_SQLITE_INSERT_MESSAGE, [(*row, when) for row in starts.messages]),
        (_SQLITE_CONTINUE, [(when, conversation) for conversation in starts.continued]),
        (_SQLITE_INSERT_RUN, [(*run, RUNNING, when) for run in runs]),
        (_SQLITE_INSERT_EVENTS, events),
    )
    for sql, parameters in statements:
        if parameters:
            cursor = await driver.executemany(sql, parameters)
            await cursor.close()


async def append_events(
    db: Database,
    message_id: str,
    events: Sequence[StoredEvent],
    *,
    status: str | None = None,
    usage: RunUsage | None = None,
) -> None:
    """One run's events in one transaction; with `status` (and its usage), the run ends in the
    same one."""
    ends = {message_id: RunEnd(status, usage or RunUsage())} if status is not None else {}
    await write_batch(db, {message_id: list(events)}, ends)


async def write_batch(
    db: Database, events: Mapping[str, Sequence[StoredEvent]], ends: Mapping[str, RunEnd]
) -> None:
    """The events of many runs and the ends of some, in one transaction on the driver's own
    connection (`Database.write_driver`): one insert of all the events, one keyed update of
    all the ends, readers notified of each run."""
    if not any(events.values()) and not ends:
        return
    async with db.write_driver() as driver:
        await _write_rows(db, driver, events, ends)


async def write_ends(
    db: Database,
    driver: Any,
    answers: Sequence[Message],
    events: Mapping[str, Sequence[StoredEvent]],
    ends: Mapping[str, RunEnd],
) -> None:
    """The answers (assistant messages, each touching its conversation), the runs' last
    events and their ends, in one transaction on the driver's connection
    (`Database.write_driver`'s): on PostgreSQL one statement, on SQLite one per table in the
    caller's transaction. A row the database refuses (an answer whose id is taken) fails all
    of it with the driver's own error (`db.refused_row` tells it)."""
    if not db.is_sqlite:
        await driver.execute(
            _POSTGRES_END, *_columns(_answer_rows(db, answers), 8), *_postgres_rows(events, ends)
        )
        return
    rows = _answer_rows(db, answers)
    # Sorted: two answers of one conversation ending together leave it the later's time.
    touched = sorted((when, conversation) for (_, conversation, *_, when) in rows)
    for sql, parameters in ((_SQLITE_INSERT_ANSWER, rows), (_SQLITE_CONTINUE, touched)):
        if parameters:
            cursor = await driver.executemany(sql, parameters)
            await cursor.close()
    await _write_rows(db, driver, events, ends)


def _answer_rows(db: Database, answers: Sequence[Message]) -> list[tuple[Any, ...]]:
    """Each answer's columns as the driver takes them: JSON as text (SQL NULL for None) and
    the timestamp as SQLAlchemy would bind it."""
    timestamp = _timestamps(db)
    return [
        (
            row.id,
            row.conversation_id,
            row.role,
            row.content,
            _json(row.tool_calls),
            _json(row.tool_results),
            _json(row.usage),
            timestamp(row.created_at),
        )
        for row in answers
    ]


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _timestamps(db: Database) -> Callable[[datetime], Any]:
    """Timestamps as SQLAlchemy binds the column's type (SQLite keeps text in its own format)."""
    dialect = db.engine.dialect
    bind = _CREATED_AT.dialect_impl(dialect).bind_processor(dialect)
    return bind or (lambda when: when)


# The writer's statements in each driver's SQL: it writes every window while chats stream.
_SQLITE_INSERT_EVENTS = "INSERT INTO chat_events (message_id, n, data) VALUES (?, ?, ?)"
_SQLITE_END_RUN = (
    "UPDATE chat_runs SET status = ?, input_tokens = ?, output_tokens = ?, provider_calls = ?,"
    " tool_calls = ? WHERE message_id = ?"
)
_SQLITE_INSERT_RUN = (
    "INSERT INTO chat_runs (message_id, user_id, status, created_at, stop_requested,"
    " input_tokens, output_tokens, provider_calls, tool_calls) VALUES (?, ?, ?, ?, 0, 0, 0, 0, 0)"
)
_SQLITE_INSERT_CONVERSATION = (
    "INSERT INTO conversations (id, user_id, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?)"
)
_SQLITE_INSERT_MESSAGE = (
    "INSERT INTO messages (id, conversation_id, role, content, created_at, interrupted)"
    " VALUES (?, ?, ?, ?, ?, 0)"
)
_SQLITE_CONTINUE = "UPDATE conversations SET updated_at = ? WHERE id = ?"
_SQLITE_INSERT_ANSWER = (
    "INSERT INTO messages (id, conversation_id, role, content, tool_calls, tool_results, usage,"
    " created_at, interrupted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)"
)
# The sub-statements see one snapshot and run in no set order; the messages' foreign key to a
# conversation inserted beside them is checked at the statement's end, when both are there.
_POSTGRES_INSERT_STARTS = """
WITH conversation AS (
    INSERT INTO conversations (id, user_id, title, created_at, updated_at)
    SELECT i, u, t, $1::timestamptz, $1::timestamptz
    FROM unnest($2::text[], $3::text[], $4::text[]) AS c(i, u, t)
), message AS (
    INSERT INTO messages (id, conversation_id, role, content, created_at, interrupted)
    SELECT i, c, r, t, $1::timestamptz, false
    FROM unnest($5::text[], $6::text[], $7::text[], $8::text[]) AS m(i, c, r, t)
), continued AS (
    UPDATE conversations SET updated_at = $1::timestamptz WHERE id = ANY($9::text[])
), run AS (
    INSERT INTO chat_runs (message_id, user_id, status, created_at, stop_requested,
        input_tokens, output_tokens, provider_calls, tool_calls)
    SELECT m, u, $10::text, $1::timestamptz, false, 0, 0, 0, 0
    FROM unnest($11::text[], $12::text[]) AS r(m, u)
), first AS (
    INSERT INTO chat_events (message_id, n, data)
    SELECT * FROM unnest($11::text[], $13::int[], $14::text[])
)
SELECT pg_notify($15, m) FROM unnest($11::text[]) AS m
"""
# PostgreSQL: the events, the ends and the notifications in one statement (one round trip, its
# own transaction in autocommit); the notifications are delivered at its commit.
_EVENTS_AND_ENDS = """
inserted AS (
    INSERT INTO chat_events (message_id, n, data)
    SELECT * FROM unnest(${0}::text[], ${1}::int[], ${2}::text[])
), ended AS (
    UPDATE chat_runs SET status = e.s, input_tokens = e.i, output_tokens = e.o,
        provider_calls = e.p, tool_calls = e.t
    FROM unnest(${3}::text[], ${4}::int[], ${5}::int[], ${6}::int[], ${7}::int[], ${8}::text[])
        AS e(s, i, o, p, t, m)
    WHERE chat_runs.message_id = e.m
)
SELECT pg_notify(${9}, m) FROM unnest(${10}::text[]) AS m
"""
_POSTGRES_WRITE = "WITH " + _EVENTS_AND_ENDS.format(*range(1, 12))
# The answers, each touching its conversation (the latest answer's time when two end in one),
# with the runs' last events and ends: a chat's last write, one statement.
_POSTGRES_END = """
WITH answer AS (
    INSERT INTO messages (id, conversation_id, role, content, tool_calls, tool_results, usage,
        created_at, interrupted)
    SELECT i, c, r, t, k::json, x::json, u::json, w, false
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
        $7::text[], $8::timestamptz[]) AS a(i, c, r, t, k, x, u, w)
), touched AS (
    UPDATE conversations SET updated_at = a.w
    FROM (SELECT c, max(w) AS w FROM unnest($2::text[], $8::timestamptz[]) AS a(c, w)
        GROUP BY c) AS a
    WHERE conversations.id = a.c
), """ + _EVENTS_AND_ENDS.format(*range(9, 20))  # noqa: S608 (constants only)


async def _write_rows(
    db: Database,
    driver: Any,
    events: Mapping[str, Sequence[StoredEvent]],
    ends: Mapping[str, RunEnd],
) -> None:
    if not db.is_sqlite:
        await driver.execute(_POSTGRES_WRITE, *_postgres_rows(events, ends))
        return
    for sql, parameters in (
        (_SQLITE_INSERT_EVENTS, _event_rows(events)),
        (_SQLITE_END_RUN, _end_rows(ends)),
    ):
        if parameters:
            cursor = await driver.executemany(sql, parameters)
            await cursor.close()


def _event_rows(events: Mapping[str, Sequence[StoredEvent]]) -> list[tuple[Any, ...]]:
    return [(message_id, n, data) for message_id, stored in events.items() for n, data in stored]


def _end_rows(ends: Mapping[str, RunEnd]) -> list[tuple[Any, ...]]:
    return [
        (
            end.status,
            end.usage.input_tokens,
            end.usage.output_tokens,
            end.usage.provider_calls,
            end.usage.tool_calls,
            message_id,
        )
        for message_id, end in ends.items()
    ]


def _postgres_rows(
    events: Mapping[str, Sequence[StoredEvent]], ends: Mapping[str, RunEnd]
) -> list[Any]:
    """`_EVENTS_AND_ENDS`'s parameters: the events' and the ends' columns, the channel and the
    runs to notify."""
    notified = list({**events, **ends})
    return [
        *_columns(_event_rows(events), 3),
        *_columns(_end_rows(ends), 6),
        EVENTS_CHANNEL,
        notified,
    ]


def _columns(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows as `width` arrays, one a column (PostgreSQL's `unnest` takes them so)."""
    return [[row[k] for row in rows] for k in range(width)]


async def close_run(db: Database, message_id: str, final_data: str, status: str) -> bool:
    """For a process that closes another's run (its process died): appends `final_data` after
    the last stored event and sets `status`, if the run is still marked running. True when
    it closed it; readers tailing the run receive the event and end."""
    async with db.write() as session:
        closed = await session.execute(
            update(ChatRun)
            .where(ChatRun.message_id == message_id, ChatRun.status == RUNNING)
            .values(status=status)
        )
        if not closed.rowcount:  # type: ignore[attr-defined]
            return False
        last = await session.scalar(
            select(func.max(ChatEvent.n)).where(ChatEvent.message_id == message_id)
        )
        session.add(ChatEvent(message_id=message_id, n=int(last or 0) + 1, data=final_data))
        await _notify(db, session, EVENTS_CHANNEL, message_id)
        return True


async def run_owner_status(db: Database, message_id: str) -> tuple[str, str] | None:
    """(user id, status) of a run whose events are kept; None when there is none."""
    cutoff = utcnow() - KEPT_FOR
    async with db.read() as session:
        row = (
            await session.execute(
                select(ChatRun.user_id, ChatRun.status).where(
                    ChatRun.message_id == message_id, ChatRun.created_at >= cutoff
                )
            )
        ).first()
    return (row[0], row[1]) if row is not None else None


async def events_after(db: Database, message_id: str, after: int) -> list[StoredEvent]:
    async with db.read() as session:
        rows = await session.execute(
            select(ChatEvent.n, ChatEvent.data)
            .where(ChatEvent.message_id == message_id, ChatEvent.n > after)
            .order_by(ChatEvent.n)
        )
        return [(n, data) for n, data in rows]


async def request_stop(db: Database, message_id: str, user_id: str) -> StopAnswer:
    mine = (ChatRun.message_id == message_id, ChatRun.user_id == user_id)
    ask = update(ChatRun).where(*mine, ChatRun.status == RUNNING).values(stop_requested=True)
    owner = select(ChatRun.user_id).where(ChatRun.message_id == message_id)
    asked, owned_by = await _change_or_look(db, ask, STOP_CHANNEL, message_id, owner)
    if asked:
        return StopAnswer.ASKED
    return StopAnswer.NOT_RUNNING if owned_by == user_id else StopAnswer.NOT_FOUND


async def stops_asked(db: Database) -> list[str]:
    """The running runs a stop was asked for, of every process (polled on SQLite, where
    nothing notifies): the few rows of a partial index, however many runs there are."""
    async with db.read() as session:
        return list(await session.scalars(_STOPS_ASKED))


_STOPS_ASKED = select(ChatRun.message_id).where(text(STOPS_ASKED))


async def ask_approval(db: Database, message_id: str, tool_call_id: str) -> None:
    async with db.write() as session:
        session.add(ChatApproval(message_id=message_id, tool_call_id=tool_call_id, status=PENDING))


async def approval_status(db: Database, message_id: str, tool_call_id: str) -> str | None:
    async with db.read() as session:
        return await session.scalar(
            select(ChatApproval.status).where(
                ChatApproval.message_id == message_id, ChatApproval.tool_call_id == tool_call_id
            )
        )


async def answer_approval(
    db: Database, message_id: str, tool_call_id: str, user_id: str, status: str
) -> Answer:
    """The user's answer to a pending approval: DONE, CONFLICT (already answered or timed
    out) or NOT_FOUND (no such call of one of the user's messages)."""
    owned = select(ChatRun.message_id).where(
        ChatRun.message_id == message_id, ChatRun.user_id == user_id
    )
    call = (ChatApproval.message_id.in_(owned), ChatApproval.tool_call_id == tool_call_id)
    answer = update(ChatApproval).where(*call, ChatApproval.status == PENDING).values(status=status)
    current = select(ChatApproval.status).where(*call)
    answered, was = await _change_or_look(db, answer, APPROVAL_CHANNEL, message_id, current)
    if answered:
        return Answer.DONE
    return Answer.NOT_FOUND if was is None else Answer.CONFLICT


async def expire_approval(db: Database, message_id: str, tool_call_id: str) -> bool:
    """Time out a pending approval; False when an answer came first."""
    async with db.write() as session:
        expired = await session.execute(
            update(ChatApproval)
            .where(
                ChatApproval.message_id == message_id,
                ChatApproval.tool_call_id == tool_call_id,
                ChatApproval.status == PENDING,
            )
            .values(status=EXPIRED)
        )
        return bool(expired.rowcount)  # type: ignore[attr-defined]


async def prune(db: Database, now: datetime | None = None) -> int:
    """Forget the events of runs older than 24 h (the runs stay: their usage counts for the
    month); the number of events removed."""
    cutoff = (now or utcnow()) - KEPT_FOR
    old = select(ChatRun.message_id).where(ChatRun.created_at < cutoff)
    async with db.write() as session:
        removed = await session.execute(delete(ChatEvent).where(ChatEvent.message_id.in_(old)))
        return int(removed.rowcount)  # type: ignore[attr-defined]


# One statement for any number of runs.
_NOTIFY = text("SELECT pg_notify(:channel, m) FROM unnest(CAST(:ids AS text[])) AS m")


async def _change_or_look(
    db: Database, change: Update, channel: str, message_id: str, why: Select[str]
) -> tuple[bool, str | None]:
    """A stop or an answer in one transaction: `change`, and when it changed a row the run's
    waiters on `channel` are woken at commit, `(True, None)`; else `(False, <why's value>)`,
    read in the same transaction, so that the caller can tell 404 from 409."""
    async with db.write() as session:
        changed = await session.execute(change)
        if changed.rowcount:  # type: ignore[attr-defined]
            await _notify(db, session, channel, message_id)
            return True, None
        return False, await session.scalar(why)


async def _notify(db: Database, session: AsyncSession, channel: str, *message_ids: str) -> None:
    if not db.is_sqlite and message_ids:
        await session.execute(_NOTIFY, {"channel": channel, "ids": list(message_ids)})
