"""Wake-ups between the parts of chats that run apart: the readers of a message's events
(`chat.resume`), a run asked to stop and a run waiting for an approval, in this process and in
others.

In one process a wake-up is an `asyncio.Event`. Across processes and instances on PostgreSQL,
one LISTEN connection per process (`db.notifications.Listener`) receives the notifications
that `chat.store` sends with each write, so instances share nothing but the database. SQLite
has no notifications: readers poll the events table (`SQLITE_POLL_S`), the runs of a process
poll their stop flags (`chat.stream.ChatRuns`) and a run waiting for an approval reads its
answer every `poll_s` (`chat.store.RunRecord.approval`); all are cheap local reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from controlcenter.common.logs import get_logger
from controlcenter.db import Database
from controlcenter.db.notifications import Listener

log = get_logger(__name__)

EVENTS_CHANNEL = "cc_chat_events"
STOP_CHANNEL = "cc_chat_stop"
APPROVAL_CHANNEL = "cc_chat_approval"
SQLITE_POLL_S = 0.1
# On PostgreSQL a reader wakes on notifications; this only bounds the wait should one be
# lost (the LISTEN connection dropped and is being opened again).
POSTGRES_SAFETY_POLL_S = 2.0


class Signals:
    def __init__(
        self,
        db: Database,
        on_stop: Callable[[str], None],
        on_approval: Callable[[str], None] | None = None,
    ) -> None:
        self._db = db
        self._on_stop = on_stop
        self._on_approval = on_approval or (lambda _: None)
        self._watchers: dict[str, set[asyncio.Event]] = {}
        self._listener: Listener | None = None
        self._opening = asyncio.Lock()
        self.poll_s = SQLITE_POLL_S if db.is_sqlite else POSTGRES_SAFETY_POLL_S

    @contextmanager
    def watch(self, message_id: str) -> Iterator[asyncio.Event]:
        """An event set whenever the message's stored events may have grown."""
        woken = asyncio.Event()
        self._watchers.setdefault(message_id, set()).add(woken)
        try:
            yield woken
        finally:
            watchers = self._watchers.get(message_id)
            if watchers is not None:
                watchers.discard(woken)
                if not watchers:
                    del self._watchers[message_id]

    def wake(self, message_id: str) -> None:
        for woken in self._watchers.get(message_id, ()):
            woken.set()

    async def listen(self) -> None:
        """Open this process's LISTEN connection if it is not open (PostgreSQL only)."""
        if self._db.is_sqlite or self._listener is not None:
            return
        async with self._opening:
            if self._listener is not None:
                return
            handlers = {
                EVENTS_CHANNEL: self.wake,
                STOP_CHANNEL: self._on_stop,
                APPROVAL_CHANNEL: self._on_approval,
            }
            try:
                self._listener = await Listener.open(self._db.url, handlers, self._lost)
            except Exception as exc:  # readers fall back to polling until the next attempt
                log.warning("chat notifications unavailable", error=type(exc).__name__)

    def _lost(self, listener: Listener) -> None:
        if self._listener is listener:
            self._listener = None
            for watchers in self._watchers.values():  # read again, then listen again
                for woken in watchers:
                    woken.set()

    async def aclose(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()
