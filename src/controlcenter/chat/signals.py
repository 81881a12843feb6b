"""Wake-ups between the parts of chats that run apart: the readers of a message's events
(`chat.resume`), a run asked to stop and a run waiting for an approval, in this process and in
others.

In one process a wake-up is an `asyncio.Event`, set by the process's event writer when it
stored a message's events. Across processes and instances on PostgreSQL, one LISTEN
connection per process (`db.notifications.Listener`) receives the notifications that
`chat.store` sends with each write, so instances share nothing but the database. SQLite has no
notifications: one task per process (`_poll`, running while anyone waits) reads, every
`SQLITE_POLL_S`, how far the watched messages got (one query for all of them) and wakes the
readers of those that moved, so a waiting reader costs no query of its own however many
there are; on PostgreSQL that task runs only while the LISTEN connection is down.

A run of this process is told of its stop and of its approvals' answers through the flags it
holds here (`enlist`): a stop or an answer given in this process sets them at once
(`stop`, `poke`), one notified from another sets them on arrival. On SQLite a stop marks the
topic `STOPS` changed (`db.changes`), whose stamps every process already watches for its
caches: when the stamp moves while runs are enlisted here, the process reads the stop flags
asked anywhere once (the few rows of a partial index), so a run costs no read of its own
while nobody stops anything. A run waiting for an approval reads its answer again every
`poll_s` (`chat.run.record.RunRecord.approval`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import bindparam, func, select, text
from sqlalchemy.orm import Session

from controlcenter.chat.models import STOPS_ASKED, ChatEventRow, ChatRun
from controlcenter.common.logs import get_logger
from controlcenter.db import Database
from controlcenter.db.engine import DatabaseClosedError
from controlcenter.db.notifications import Listener

log = get_logger(__name__)

EVENTS_CHANNEL = "cc_chat_events"
STOP_CHANNEL = "cc_chat_stop"
APPROVAL_CHANNEL = "cc_chat_approval"
SQLITE_POLL_S = 0.1
# On PostgreSQL readers wake on notifications; while the LISTEN connection is down (it could
# not be opened, or dropped) the process polls at this pace and tries to open it again.
POSTGRES_SAFETY_POLL_S = 2.0
POLL_CHUNK = 500  # message ids per query of the poll
STOPS = "chat_stops"  # SQLite: the `db.changes` topic a stop marks changed
Progress = tuple[str, int | None]  # a run's status and its last stored event's number
# The poll's condition is the partial index's own (`models.STOPS_ASKED`), as its text: SQLite
# uses a partial index only for a query whose WHERE holds the index's terms as written, and
# renders a boolean column compared (`stop_requested = 1`), which does not match.
ASKED_STOPS = select(ChatRun.message_id).where(text(STOPS_ASKED))


@dataclass
class RunFlags:
    """What a run of this process is told: its stop was asked; an approval of it may have
    been answered (it reads it again)."""

    stop: asyncio.Event = field(default_factory=asyncio.Event)
    poked: asyncio.Event = field(default_factory=asyncio.Event)


class Signals:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._runs: dict[str, RunFlags] = {}
        self._stop_reader: asyncio.Task[None] | None = None
        self._watchers: dict[str, set[asyncio.Event]] = {}
        self._listener: Listener | None = None
        self._opening = asyncio.Lock()
        self._poller: asyncio.Task[None] | None = None
        self._stops_moved = False  # SQLite: the stop flags changed since the last read began
        self.poll_s = SQLITE_POLL_S if db.is_sqlite else POSTGRES_SAFETY_POLL_S
        if db.is_sqlite:
            db.changes.react(STOPS, self._stops_changed)

    @contextmanager
    def watch(self, message_id: str) -> Iterator[asyncio.Event]:
        """An event set whenever the message's stored events may have grown (or its run
        ended): its waiter needs no timeout of its own."""
        woken = asyncio.Event()
        self._watchers.setdefault(message_id, set()).add(woken)
        self._start_poll()
        try:
            yield woken
        finally:
            watchers = self._watchers.get(message_id)
            if watchers is not None:
                watchers.discard(woken)
                if not watchers:
                    del self._watchers[message_id]

    def enlist(self, message_id: str) -> RunFlags:
        """The flags of a run of this process, set until `dismiss`."""
        flags = self._runs[message_id] = RunFlags()
        return flags

    def dismiss(self, message_id: str) -> None:
        self._runs.pop(message_id, None)

    def stop(self, message_id: str) -> None:
        """A stop asked for the run: it is told if it runs here."""
        flags = self._runs.get(message_id)
        if flags is not None:
            flags.stop.set()
            flags.poked.set()

    def poke(self, message_id: str) -> None:
        """An approval of the run was answered: it reads it again if it runs here."""
        flags = self._runs.get(message_id)
        if flags is not None:
            flags.poked.set()

    def _stops_changed(self) -> None:
        """SQLite: a stop was asked somewhere (or the process no longer knows): the stop
        flags are read again, once, if a run of this process could be among them."""
        if not self._runs:
            return
        self._stops_moved = True
        if self._stop_reader is None:
            self._stop_reader = asyncio.get_running_loop().create_task(self._read_stops())

    async def _read_stops(self) -> None:
        """Read the stop flags until no change arrived during the last read."""
        try:
            while self._stops_moved and self._runs:
                self._stops_moved = False
                try:
                    asked = await self._db.run_read(_asked_stops)
                except DatabaseClosedError:
                    return  # the process is done with its database, and with its runs
                except Exception as exc:
                    # Read again after a pause: the change that asked for this read is not
                    # repeated, and a stop it carried would otherwise wait for the next one.
                    log.warning("chat stop flags unreadable", error=type(exc).__name__)
                    self._stops_moved = True
                    await asyncio.sleep(self.poll_s)
                    continue
                for message_id in asked:  # any process's: those running elsewhere are no-ops
                    self.stop(message_id)
        finally:
            self._stop_reader = None

    def wake(self, message_id: str) -> None:
        for woken in self._watchers.get(message_id, ()):
            woken.set()

    def _wake_all(self) -> None:
        for watchers in self._watchers.values():
            for woken in watchers:
                woken.set()

    def _polling(self) -> bool:
        return self._db.is_sqlite or self._listener is None

    def _start_poll(self) -> None:
        if self._poller is None and self._polling():
            self._poller = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        """While anyone waits and nothing notifies: wake the readers of the messages whose
        run moved since the last look (the first look wakes every reader once)."""
        seen: dict[str, Progress] = {}
        try:
            while self._watchers and self._polling():
                await asyncio.sleep(self.poll_s)
                if not self._db.is_sqlite:
                    await self.listen()  # once open, notifications take over
                    if not self._polling():
                        return
                watched = list(self._watchers)
                try:
                    now = await self._progress(watched)
                except Exception as exc:
                    log.warning("chat events unreadable", error=type(exc).__name__)
                    continue
                for message_id in watched:
                    if now.get(message_id) != seen.get(message_id):
                        self.wake(message_id)
                seen = now
        finally:
            self._poller = None

    async def _progress(self, message_ids: Sequence[str]) -> dict[str, Progress]:
        """How far each run got (its status, its last event's number), a query per
        `POLL_CHUNK` runs whatever the number of their readers."""
        return await self._db.run_read(_read_progress, message_ids)

    async def listen(self) -> None:
        """Open this process's LISTEN connection if it is not open (PostgreSQL only)."""
        if self._db.is_sqlite or self._listener is not None:
            return
        async with self._opening:
            if self._listener is not None:
                return
            handlers = {
                EVENTS_CHANNEL: self.wake,
                STOP_CHANNEL: self.stop,
                APPROVAL_CHANNEL: self.poke,
            }
            try:
                self._listener = await Listener.open(self._db.url, handlers, self._lost)
            except Exception as exc:  # the process polls until the next attempt
                log.warning("chat notifications unavailable", error=type(exc).__name__)
                self._start_poll()
                return
        # What was notified while nothing listened is read again.
        self._wake_all()

    def _lost(self, listener: Listener) -> None:
        if self._listener is listener:
            self._listener = None
            self._wake_all()  # read again, then poll until listening again
            self._start_poll()

    async def aclose(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()
        for poller in (self._poller, self._stop_reader):
            if poller is not None:
                poller.cancel()
                await asyncio.gather(poller, return_exceptions=True)
        self._poller = self._stop_reader = None


def _asked_stops(session: Session) -> list[str]:
    """The runs whose stop was asked, any process's."""
    return list(session.scalars(ASKED_STOPS))


# Built once, run with each chunk of ids: each run's status and the number of its last
# stored event.
_LAST_EVENT = (
    select(func.max(ChatEventRow.n))
    .where(ChatEventRow.message_id == ChatRun.message_id)
    .scalar_subquery()
)
_PROGRESS = select(ChatRun.message_id, ChatRun.status, _LAST_EVENT).where(
    ChatRun.message_id.in_(bindparam("ids", expanding=True))
)


def _read_progress(session: Session, message_ids: Sequence[str]) -> dict[str, Progress]:
    found: dict[str, Progress] = {}
    for start in range(0, len(message_ids), POLL_CHUNK):
        chunk = list(message_ids[start : start + POLL_CHUNK])
        rows = session.execute(_PROGRESS, {"ids": chunk})
        found.update((message_id, (status, n)) for message_id, status, n in rows)
    return found
