"""Engines, sessions, and the process's watch of its caches (`changes`).

SQLite goes through SQLAlchemy's aiosqlite dialect, set up for concurrent use as SQLAlchemy's
SQLite documentation describes ("Serializable isolation / Savepoints / Transactional DDL"):
the sqlite3 module's own BEGIN is switched off (`isolation_level = None`) and SQLAlchemy's
`begin` event starts each transaction instead. SQLite has one writer at a time, so writes go
through an engine of their own whose pool holds one connection (`pool_size=1,
max_overflow=0`): a process's writers queue in SQLAlchemy's pool, not in SQLite's busy
handler. A write transaction begins IMMEDIATE: it takes the database's write lock before its
first read, so a transaction that reads and then writes never fails with "database is locked"
because another writer committed in between; while another process holds the lock, BEGIN
IMMEDIATE waits in SQLite's busy handler for up to `BUSY_TIMEOUT_S`, inside aiosqlite's
thread. Reads go through a second engine with a pool of their own and no `begin` listener:
they begin no transaction, each SELECT reads a consistent snapshot of its own, and in WAL
they never wait for the writer nor it for them.

PostgreSQL uses asyncpg behind one queue pool. Read sessions run in AUTOCOMMIT (SQLAlchemy's
`isolation_level` execution option): no BEGIN and ROLLBACK round trips around a read. Write
sessions are ordinary transactions. A connection the server closed (a restart, an
administrator's `pg_terminate_backend`, an idle timeout) is replaced at checkout instead of
failing a request: the server says so when it closes one, asyncpg marks the connection closed
as the event loop reads that, and the pool's `checkout` listener hands the pool such a
connection back as a `DisconnectionError`, as SQLAlchemy's pool events document, for a fresh
one. It asks the driver, not the server, instead of `pool_pre_ping`'s round trip at every
checkout.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from functools import partial
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import DateTime, Engine, create_engine, event, make_url
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection
from sqlalchemy.types import TypeDecorator

from controlcenter.config import check_database_url
from controlcenter.db.changes import Changes, committed_stamps
from controlcenter.db.text_match import register_sqlite_functions

# How long a SQLite writer waits for another connection's write transaction before it fails.
BUSY_TIMEOUT_S = 30.0
# Connections kept open per process, and opened beyond them under load: a unit of work holds
# one for a statement or two, never across a provider or CRM call.
POOL_SIZE = 20
POOL_OVERFLOW = 20
# SQLite's readers: threads, each with a connection of its own (reads never wait for one).
SQLITE_READERS = 8

P = ParamSpec("P")
T = TypeVar("T")


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC timestamps on every backend (SQLite drops the offset)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return as_utc(value)


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return str(uuid.uuid4())


class Database:
    """The engines plus the two ways to open a unit of work: `read()` and `write()`, and the
    process's watch of what its caches keep (`changes`)."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = check_database_url(url)
        self.is_sqlite = url.startswith("sqlite")
        # The SQLAlchemy dialect's name, for statements built before a session is opened.
        self.dialect = "sqlite" if self.is_sqlite else "postgresql"
        pool: dict[str, Any] = {"pool_size": POOL_SIZE, "max_overflow": POOL_OVERFLOW}
        if self.is_sqlite:
            # sqlite3's `timeout` is SQLite's busy timeout.
            connect = {"connect_args": {"timeout": BUSY_TIMEOUT_S}}
            self.engine: AsyncEngine = create_async_engine(
                url,
                echo=echo,
                pool_size=1,
                max_overflow=0,
                pool_timeout=BUSY_TIMEOUT_S,
                **connect,
            )
            self.read_engine: AsyncEngine = create_async_engine(url, echo=echo, **pool, **connect)
            _configure_sqlite(self.engine, writes=True)
            _configure_sqlite(self.read_engine, writes=False)
        else:
            self.engine = create_async_engine(url, echo=echo, **pool)
            event.listen(self.engine.sync_engine.pool, "checkout", _refuse_closed)
            # Same pool; the connection's isolation level is restored when it goes back.
            self.read_engine = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self.read_sessions = async_sessionmaker(self.read_engine, expire_on_commit=False)
        if self.is_sqlite:
            self._sqlite = _SqliteThreads(url)
        self.changes = Changes(self.run_read, self.url, is_sqlite=self.is_sqlite)

    async def run_read(
        self, work: Callable[Concatenate[Session, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`work(session, *args, **kwargs)` in a session for reads: each statement reads
        committed data on its own, with no transaction around it (SQLite: no BEGIN, no lock;
        PostgreSQL: autocommit); what it returns."""
        if self.is_sqlite:
            return await self._sqlite.read(partial(work, **kwargs), *args)
        async with self.read_sessions() as session:
            return await session.run_sync(work, *args, **kwargs)

    async def run_write(
        self, work: Callable[Concatenate[Session, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`work(session, *args, **kwargs)` in a transaction committed when it returns, rolled
        back when it raises; what it returns. The topics it marked changed
        (`changes.mark_changed`) are forgotten by this process's caches as soon as it commits."""
        if self.is_sqlite:
            return await self._sqlite.write(partial(work, **kwargs), self.changes.committed, *args)
        async with self.sessions() as session:
            async with session.begin():
                result = await session.run_sync(work, *args, **kwargs)
            self.changes.committed(committed_stamps(session.sync_session))
        return result

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """A session for reads: each statement reads committed data on its own, with no
        transaction around it (SQLite: no BEGIN, no lock; PostgreSQL: autocommit)."""
        async with self.read_sessions() as session:
            yield session

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """A transaction committed when the block ends, rolled back on any exception. The
        topics it marked changed (`changes.mark_changed`) are forgotten by this process's
        caches as soon as it commits."""
        async with self.sessions() as session:
            async with session.begin():
                yield session
            self.changes.committed(committed_stamps(session.sync_session))

    async def dispose(self) -> None:
        await self.changes.stop()
        await self.engine.dispose()
        if self.is_sqlite:
            await self.read_engine.dispose()
            await asyncio.to_thread(self._sqlite.dispose)


class _SqliteThreads:
    """SQLite's units of work, each run whole in a thread with SQLAlchemy's synchronous
    `Session` on the sqlite3 driver (SQLAlchemy's documented way to use a blocking driver from
    asyncio is a thread: `run_in_executor`). One unit costs one hop to a thread and back, where
    the aiosqlite driver hops for every cursor, statement, fetch and commit. Writes run one at
    a time on the one thread of the write executor with the write engine's one connection: a
    process's writers queue in that executor, in order, never in SQLite's busy handler; reads
    run on `SQLITE_READERS` threads with a connection each."""

    def __init__(self, url: str) -> None:
        sync_url = make_url(url).set(drivername="sqlite")
        # sqlite3's `timeout` is SQLite's busy timeout; a pooled connection is used by more
        # than the thread that opened it (always by one thread at a time).
        connect = {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
        self.write_engine: Engine = create_engine(
            sync_url, pool_size=1, max_overflow=0, connect_args=connect
        )
        self.read_engine: Engine = create_engine(
            sync_url, pool_size=SQLITE_READERS, max_overflow=0, connect_args=connect
        )
        _configure_sqlite_sync(self.write_engine, writes=True)
        _configure_sqlite_sync(self.read_engine, writes=False)
        self._write_sessions = sessionmaker(self.write_engine, expire_on_commit=False)
        self._read_sessions = sessionmaker(self.read_engine, expire_on_commit=False)
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="sqlite-write")
        self._readers = ThreadPoolExecutor(SQLITE_READERS, thread_name_prefix="sqlite-read")

    async def read(self, work: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, partial(self._read, work, *args))

    async def write(
        self, work: Callable[..., T], committed: Callable[[dict[str, str]], None], *args: Any
    ) -> T:
        loop = asyncio.get_running_loop()
        unit = partial(self._write, loop, committed, work, *args)
        return await loop.run_in_executor(self._writer, unit)

    def _read(self, work: Callable[..., T], *args: Any) -> T:
        with self._read_sessions() as session:
            return work(session, *args)

    def _write(
        self,
        loop: asyncio.AbstractEventLoop,
        committed: Callable[[dict[str, str]], None],
        work: Callable[..., T],
        *args: Any,
    ) -> T:
        with self._write_sessions() as session:
            with session.begin():
                result = work(session, *args)
            # On the loop before the caller resumes (and even if it was cancelled meanwhile):
            # the process's caches forget what the commit changed.
            loop.call_soon_threadsafe(committed, committed_stamps(session))
        return result

    def dispose(self) -> None:
        self._writer.shutdown()
        self._readers.shutdown()
        self.write_engine.dispose()
        self.read_engine.dispose()


def as_utc(value: datetime | str | None) -> datetime | None:
    """A timestamp as an aware UTC datetime (SQLite's driver gives naive UTC text)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _refuse_closed(
    dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection
) -> None:
    """A pooled PostgreSQL connection the server has closed is replaced (see the module's
    docstring)."""
    if record.driver_connection is None or record.driver_connection.is_closed():
        raise DisconnectionError("the server closed this connection")


def _configure_sqlite(engine: AsyncEngine, *, writes: bool) -> None:
    _configure_sqlite_sync(engine.sync_engine, writes=writes)


def _configure_sqlite_sync(engine: Engine, *, writes: bool) -> None:
    """The `connect` and `begin` listeners of SQLAlchemy's SQLite documentation (see the
    module's docstring), with the pragmas every connection needs; `begin` on the write
    engine only."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's `begin` below starts them
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        # SQLite's advice for WAL: never corrupt, and no sync of the log at each commit.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()
        register_sqlite_functions(dbapi_connection)

    if writes:

        @event.listens_for(engine, "begin")
        def _on_begin(connection: Connection) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
