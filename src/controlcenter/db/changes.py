"""What the processes keep in memory from the database, and how each learns it changed.

A value read from the database and kept in memory (a verified credential, the settings, the
stored MCP servers) is kept in a cachetools `TTLCache` under a topic (`Kept`). A write that
changes what a topic's caches hold calls `mark_changed(session, topic)` inside its
transaction: the topic's row of `change_stamps` gets a new random stamp and, on PostgreSQL,
`CHANNEL` is notified with the topic and its stamp (delivered when the transaction commits).
Then:

- this process empties the topic's caches as the transaction commits (`Database.run_write`);
- the other processes on the database empty theirs within `POLL_S`: on SQLite one task per
  process reads the stamps every `POLL_S` (one query of a few rows, whatever the number of
  cached values) and empties the caches of every topic whose stamp moved; on PostgreSQL one
  LISTEN connection per process receives the notification, and while it is down the task
  polls the stamps as on SQLite.

A cache keeps values only while its process watches (`Changes.start`, by the app and the
worker), and keeps a value only when no change of its topic arrived while it was read (the
topic's generation is still the one the read began under): a read that a change overtook is
used once and not kept.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Generic, TypeVar

from cachetools import TTLCache
from sqlalchemy import String, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from controlcenter.common.logs import get_logger
from controlcenter.db.base import Base
from controlcenter.db.notifications import Listener, notify
from controlcenter.db.upserts import DIALECTS, upsert

log = get_logger(__name__)

CHANNEL = "cc_changes"
# How often a process reads the stamps on SQLite (and on PostgreSQL while LISTEN is down):
# a change made through another process is in force here within this time.
POLL_S = 0.5
_CHANGED = "controlcenter_changed"  # the `session.info` key of the stamps a write set
_SEP = " "  # between a notification's topic and its stamp

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ChangeStamp(Base):
    """The last change of each topic: a random stamp, set anew by every change."""

    __tablename__ = "change_stamps"

    topic: Mapped[str] = mapped_column(String(64), primary_key=True)
    stamp: Mapped[str] = mapped_column(String(32))


_SET_STAMP = {
    dialect: upsert(dialect, ChangeStamp.__table__, key=("topic",), update=("stamp",))  # type: ignore[arg-type]
    for dialect in DIALECTS
}


def mark_changed(session: Session, *topics: str) -> None:
    """Mark `topics` changed by the session's transaction (see the module's docstring).

    Best called last in the transaction: on PostgreSQL each topic's stamp row stays locked
    from here to the commit, and every transaction that changes the topic writes that row."""
    stamps: dict[str, str] = session.info.setdefault(_CHANGED, {})
    statement = _SET_STAMP[session.get_bind().dialect.name]
    for topic in topics:
        stamps[topic] = stamp = os.urandom(16).hex()
        session.execute(statement, {"topic": topic, "stamp": stamp})
    notify(session, CHANNEL, [f"{topic}{_SEP}{stamps[topic]}" for topic in topics])


def committed_stamps(session: Session) -> dict[str, str]:
    """The topics the session's committed transaction marked changed, with their new stamps."""
    stamps: dict[str, str] = session.info.pop(_CHANGED, {})
    return stamps


# `Database.run_read`: runs a function of a session for reads, and returns what it returns.
Reader = Callable[[Callable[[Session], dict[str, str]]], Awaitable[dict[str, str]]]


# Built once: every process reads it every `POLL_S` on SQLite.
_STAMPS = select(ChangeStamp.topic, ChangeStamp.stamp)


def _stamps(session: Session) -> dict[str, str]:
    rows = session.execute(_STAMPS)
    return {topic: stamp for topic, stamp in rows}


class Changes:
    """One process's watch of the stamps, and the generation of each topic it counts."""

    def __init__(self, read: Reader, url: str, *, is_sqlite: bool, poll_s: float = POLL_S) -> None:
        self._read = read
        self._url = url
        self._is_sqlite = is_sqlite
        self.poll_s = poll_s
        self._generations: dict[str, int] = {}
        self._forgets: dict[str, list[Callable[[], None]]] = {}
        self._reactions: dict[str, list[Callable[[], None]]] = {}
        self._own: dict[str, str] = {}  # the last stamp this process set, by topic
        self._stamps: dict[str, str] | None = None  # as last read; None: read them anew
        self._watching = False
        self._task: asyncio.Task[None] | None = None
        self._listener: Listener | None = None
        self._lost: asyncio.Event | None = None

    def subscribe(self, topic: str, forget: Callable[[], None]) -> None:
        """Call `forget` whenever `topic` changes, this process stops knowing, or it stops
        watching: what a cache of the topic keeps goes."""
        self._forgets.setdefault(topic, []).append(forget)

    def react(self, topic: str, changed: Callable[[], None]) -> Callable[[], None]:
        """Call `changed` whenever `topic` changes or this process stops knowing; never when it
        stops watching, which changes nothing (and its database may be disposed next). What
        it returns ends the reaction."""
        reactions = self._reactions.setdefault(topic, [])
        reactions.append(changed)
        return lambda: reactions.remove(changed)

    def generation(self, topic: str) -> int | None:
        """How many changes of `topic` this process has seen; None while it does not watch
        (then nothing may be kept)."""
        return self._generations.get(topic, 0) if self._watching else None

    def changed(self, topics: Iterable[str]) -> None:
        """Forget what the caches of `topics` keep, and tell what reacts to them."""
        topics = set(topics)
        self._forget(topics)
        for topic in topics:
            for react in tuple(self._reactions.get(topic, ())):  # one may end itself
                react()

    def _forget(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self._generations[topic] = self._generations.get(topic, 0) + 1
            for forget in self._forgets.get(topic, ()):
                forget()

    def committed(self, stamps: dict[str, str]) -> None:
        """This process's own write set `stamps`: forget now, and know them, so that reading or
        being notified of them later forgets nothing again. A change another process made
        before is forgotten here too, since this forgets after it."""
        if self._stamps is not None:
            self._stamps.update(stamps)
        self._own.update(stamps)
        self.changed(stamps)

    def forget_all(self) -> None:
        """Forget what every cache keeps (what this process kept may no longer be so)."""
        self.changed({*self._forgets, *self._reactions, *self._generations})

    async def start(self) -> None:
        """Watch the stamps until `stop`: from the first read on, caches keep values."""
        if self._task is None:
            self._lost = asyncio.Event()
            read = asyncio.Event()
            self._task = asyncio.create_task(self._watch(read))
            await read.wait()  # the first read: its outcome says whether caches keep

    async def stop(self) -> None:
        task, self._task = self._task, None
        self._watching = False
        self._forget({*self._forgets, *self._generations})  # kept values go; nothing changed
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()

    async def _watch(self, read: asyncio.Event) -> None:
        while True:
            if not self._is_sqlite and self._listener is None:
                await self._listen()
            own_before = dict(self._own)
            try:
                stamps = await self._read_stamps()
            except Exception as exc:  # unknown until read again: keep nothing meanwhile
                if self._watching or self._stamps is None:
                    log.warning("change stamps unreadable", error=type(exc).__name__)
                self._watching = False
                self._stamps = None
                self.forget_all()
                read.set()
                await asyncio.sleep(self.poll_s)
                continue
            # A topic this process changed while the stamps were read may have been read as
            # it was before: its own stamp is what is known of it, not the read one (a later
            # change by another process differs from it, and is seen at the next read).
            racing = {t: s for t, s in self._own.items() if own_before.get(t) != s}
            stamps.update(racing)
            if self._stamps is None:
                self.forget_all()
            else:
                self.changed(
                    t for t in {*stamps, *self._stamps} if stamps.get(t) != self._stamps.get(t)
                )
            self._stamps = stamps
            self._watching = True
            read.set()
            lost = self._lost
            if self._listener is not None and lost is not None:
                await lost.wait()
                lost.clear()
            else:
                await asyncio.sleep(self.poll_s)

    async def _read_stamps(self) -> dict[str, str]:
        return await self._read(_stamps)

    async def _listen(self) -> None:
        try:
            self._listener = await Listener.open(
                self._url, {CHANNEL: self._notified}, self._on_lost
            )
        except Exception as exc:  # polled until the next attempt
            log.warning("change notifications unavailable", error=type(exc).__name__)

    def _notified(self, payload: str) -> None:
        topic, _, stamp = payload.partition(_SEP)
        if stamp and self._own.get(topic) == stamp:
            return  # this process's own write, forgotten as it committed
        self.changed([topic])

    def _on_lost(self, listener: Listener) -> None:
        if self._listener is listener:
            self._listener = None
            if self._lost is not None:
                self._lost.set()


class Kept(Generic[K, V]):
    """A cachetools `TTLCache` of values read under `topic`, emptied when the topic changes."""

    def __init__(
        self,
        changes: Changes,
        topic: str,
        *,
        maxsize: int,
        ttl_s: float,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._changes = changes
        self._topic = topic
        self._cache: TTLCache[K, V] = TTLCache(maxsize, ttl_s, timer=timer)
        changes.subscribe(topic, self._cache.clear)

    def get(self, key: K) -> V | None:
        if self._changes.generation(self._topic) is None:
            return None
        return self._cache.get(key)

    def reading(self) -> int | None:
        """The generation a read begins under, for `keep`."""
        return self._changes.generation(self._topic)

    def keep(self, read_under: int | None, key: K, value: V) -> None:
        """Keep what a read that began under `read_under` found, unless a change overtook it."""
        if read_under is not None and read_under == self._changes.generation(self._topic):
            self._cache[key] = value

    def pop(self, key: K) -> None:
        self._cache.pop(key, None)

    def __len__(self) -> int:
        return len(self._cache)
