"""Answers cut by a dead process are closed, not left half-finished.

Each process keeps a row per assistant message it is writing (`running_messages`): its owner
and a heartbeat, nothing of the answer. The row is written with the run itself, in the
transaction that starts the turn (`chat.run.start.start_turn`), so a process that dies at any
moment after a run exists leaves a row behind, and deleted in the write that stores the run's
end (`chat.run.writer`): a chat pays no write of its own for it. One task per process
(`Liveness.run`) removes the rows of the answers whose end could not be stored (gathered over
`FLUSH_DELAY_S`); the heartbeat of all its rows
comes from a thread (chat/heartbeat.py) every `CHAT_LIVENESS_INTERVAL_S`, so that a busy event
loop is not taken for a dead process. The task closes the rows of other processes whose
heartbeat is older than `STALE_INTERVALS` intervals: the assistant message is rebuilt from the
run's stored events (`chat.fold`, the one record of an answer in flight) and saved with
`interrupted: true`, the run is marked interrupted and its event stream ends with the `The
answer was interrupted` error, all in the transaction that deletes the row, so one process
closes it once. A run still marked running that has no row (its end could not be stored) is
closed the same way by any process, its own included, with no answer to save. With the
default 5 s interval a dead process's answers are closed within 20 s by any other process, or
by the next one to start.

What is lost: the events not yet written when the process died (a writer's window).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import bindparam, delete, exists, select, text
from sqlalchemy.orm import Session

from controlcenter.chat import events
from controlcenter.chat.events import event_data
from controlcenter.chat.fold import fold
from controlcenter.chat.heartbeat import Heartbeat
from controlcenter.chat.locks import hold_conversations
from controlcenter.chat.models import (
    INTERRUPTED,
    RUNNING_NOW,
    ChatEventRow,
    ChatRun,
    Message,
    RunningMessage,
)
from controlcenter.chat.run.answer import assistant_message, save_interrupted
from controlcenter.chat.run.stored import close_run
from controlcenter.common.logs import get_logger
from controlcenter.db import Database, utcnow

log = get_logger(__name__)

FLUSH_DELAY_S = 1.0
STALE_INTERVALS = 3
_FINAL = event_data(events.error(events.ANSWER_INTERRUPTED))  # a closed run's last event


class Liveness:
    def __init__(
        self, db: Database, interval_s: float, now: Callable[[], datetime] = utcnow
    ) -> None:
        """`now`: the clock of the heartbeats and of the stale limit."""
        self._db = db
        self._interval_s = interval_s
        self._now = now
        self.owner = uuid.uuid4().hex
        self._written: set[str] = set()  # the answers of this process that have a row
        self._finished: set[str] = set()
        self._wake = asyncio.Event()
        self.heartbeat = Heartbeat(
            db.url, self.owner, interval_s, has_rows=lambda: bool(self._written), now=now
        )

    # -- from the chats (synchronous, no I/O) --------------------------------------------------

    def started(self, message_id: str) -> None:
        """An answer whose row its turn's start wrote (`start_turn` with this owner)."""
        self._written.add(message_id)

    def ended(self, message_id: str) -> None:
        """An answer whose row the write of its end deleted: no longer beaten."""
        self._written.discard(message_id)

    def finished(self, message_id: str) -> None:
        """An answer whose end could not be stored: its row is deleted by the task, so that
        its run, still marked running, is closed (`close_stale`)."""
        self._finished.add(message_id)
        self._wake.set()

    # -- the task ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Until cancelled: flush, close the answers of dead processes (at once on start:
        what a previous process left behind and is stale is closed now). The heartbeat's
        thread runs as long as this does."""
        self.heartbeat.start()
        try:
            await self._run()
        finally:
            await asyncio.to_thread(self.heartbeat.stop)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_beat = loop.time()
        while True:
            wait = max(0.0, next_beat - loop.time())
            if self._finished:
                await asyncio.sleep(min(FLUSH_DELAY_S, wait))
            elif wait > 0:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), wait)
                    continue  # rows to delete: after the flush delay
                except TimeoutError:
                    pass
            try:
                if loop.time() >= next_beat:
                    await self._flush()
                    await self.close_stale()
                    next_beat = loop.time() + self._interval_s
                else:
                    await self._flush()
            except Exception:
                log.exception("chat liveness: could not write; trying again")
                next_beat = loop.time() + self._interval_s

    async def _flush(self) -> None:
        """Delete the rows of the answers whose end could not be stored."""
        done = set(self._finished)
        if not done:
            return
        await self._db.run_write(_drop_rows, done)
        self._finished -= done
        self._written -= done

    async def close_stale(self) -> int:
        """Close the answers whose process stopped beating (their conversation deleted
        meanwhile or not), and the runs still marked running that lost their row; how many."""
        limit = self._now() - timedelta(seconds=self._interval_s * STALE_INTERVALS)
        # Nearly every beat finds nothing: looked for in a read first, so that the beat takes
        # no write for nothing (on SQLite a write takes its `Database`'s one writer thread, a
        # turn among the processes and the whole database's lock; a read takes none of them).
        stale, rowless = await self._db.run_read(_left_running, limit, self.owner)
        closed = 0
        if stale:
            closed += await self._db.run_write(_close_rows, stale, limit, self.owner, self._now())
        if rowless:
            closed += await self._db.run_write(_close_rowless, rowless)
        if closed:
            # A stopped process's answers, and runs whose end was never stored.
            log.warning("chat answers left running were closed as interrupted", count=closed)
        return closed


def _drop_rows(session: Session, message_ids: set[str]) -> None:
    session.execute(delete(RunningMessage).where(RunningMessage.message_id.in_(message_ids)))


# Built once, run with the beat's limit and the process's owner: the liveness rows of other
# processes whose heartbeat is older than the limit.
_STALE = (
    RunningMessage.heartbeat_at < bindparam("limit"),
    RunningMessage.owner != bindparam("owner"),
)
# The stale rows and their runs' conversations (None: the run has none, or no longer exists).
_STALE_ROWS = (
    select(RunningMessage.message_id, ChatRun.conversation_id)
    .outerjoin(ChatRun, ChatRun.message_id == RunningMessage.message_id)
    .where(*_STALE)
)
# Those of them still stale, locked; on PostgreSQL those another transaction holds are passed
# over (SQLite's dialect leaves the clause out: its write transaction holds the database).
_LOCK_STALE = (
    select(RunningMessage.message_id)
    .where(RunningMessage.message_id.in_(bindparam("ids", expanding=True)), *_STALE)
    .with_for_update(skip_locked=True)
)
# The runs still marked running, begun before the limit, that have no liveness row.
RUNS_WITHOUT_ROW = select(ChatRun.message_id).where(
    text(RUNNING_NOW),  # as the partial index's condition is written
    ChatRun.created_at < bindparam("limit"),
    ~exists().where(RunningMessage.message_id == ChatRun.message_id),
)
_DROP_ROW = delete(RunningMessage).where(RunningMessage.message_id == bindparam("message_id"))

StaleRow = tuple[str, str | None]  # a stale liveness row's message and its conversation


def _left_running(
    session: Session, limit: datetime, owner: str
) -> tuple[list[StaleRow], list[str]]:
    """The stale liveness rows of other processes (`_STALE_ROWS`), and the runs still marked
    running that lost their row (`RUNS_WITHOUT_ROW`)."""
    stale = [
        (message_id, conversation)
        for message_id, conversation in session.execute(
            _STALE_ROWS, {"limit": limit, "owner": owner}
        )
    ]
    rowless = list(session.scalars(RUNS_WITHOUT_ROW, {"limit": limit}))
    return stale, rowless


def _close_rows(
    session: Session, stale: list[StaleRow], limit: datetime, owner: str, now: datetime
) -> int:
    """Each row of `stale` still stale: its answer saved as interrupted (at `now`), its run
    ended, the row deleted; how many were closed. A row that went stale after the beat's read
    is closed by the next beat: its conversation is not among those held here."""
    # The lock order of `chat.locks`: the runs' conversations first, then the rows.
    hold_conversations(session, filter(None, (conversation for _, conversation in stale)))
    ids = [message_id for message_id, _ in stale]
    locked = session.scalars(_LOCK_STALE, {"ids": ids, "limit": limit, "owner": owner}).all()
    closed = 0
    for message_id in locked:
        saved = _save_interrupted(session, message_id, now)
        session.execute(_DROP_ROW, {"message_id": message_id})
        # Its stored event stream (what the events endpoint reads) ends in the same
        # transaction, so that a client resuming it from any process reads the error
        # and stops waiting, and a stop asked from now on is answered `Not running`.
        ended = close_run(session, message_id, _FINAL, INTERRUPTED)
        if saved or ended:
            closed += 1
    return closed


def _save_interrupted(session: Session, message_id: str, now: datetime) -> bool:
    """The answer so far, as its stored events make it, saved as interrupted; not when
    its conversation was deleted while it ran, nor when the answer is saved already.
    Whether it was saved."""
    stored = session.scalars(
        select(ChatEventRow.data)
        .where(ChatEventRow.message_id == message_id)
        .order_by(ChatEventRow.n)
    )
    answer = fold(events.parsed(data) for data in stored)
    conversation_id = answer.conversation_id
    if conversation_id is None:
        return False
    if session.scalar(select(Message.id).where(Message.id == message_id)):
        return False
    message = assistant_message(
        conversation_id, message_id, answer, interrupted=True, created_at=now
    )
    return save_interrupted(session, message)


def _close_rowless(session: Session, message_ids: list[str]) -> int:
    """Runs still marked running with no liveness row, older than the stale limit: their
    end could not be stored (the database refused it) or they began before runs had a
    row. Nothing else would ever end them; what their answer had is not known. Their
    conversations are held first, in the one order of `chat.locks`."""
    conversations = select(ChatRun.conversation_id).where(ChatRun.message_id.in_(message_ids))
    hold_conversations(session, filter(None, session.scalars(conversations)))
    closed = 0
    for message_id in sorted(message_ids):  # closed once: only a run still running is
        if close_run(session, message_id, _FINAL, INTERRUPTED):
            closed += 1
    return closed
