"""Engines, units of work, and the process's watch of its caches (`changes`).

Every unit of work is a function of a SQLAlchemy `Session` (`work(session, ...)`), run by
`Database.run_read` or `Database.run_write`: the one way into the database. How it runs is
each database's cheapest documented path.

SQLite: the unit runs whole in a thread, with SQLAlchemy's synchronous `Session` on the sqlite3
driver: a blocking driver is used from asyncio through a thread (`loop.run_in_executor`), as
asyncio documents. A unit costs one hop to a thread and back, where an `AsyncSession` on the
aiosqlite driver hops to the driver's thread for every cursor, statement, fetch and commit.
The connections are set up for concurrent use as SQLAlchemy's SQLite documentation describes
("Serializable isolation / Savepoints / Transactional DDL"): the sqlite3 module's own BEGIN is
switched off (`isolation_level = None`) and SQLAlchemy's `begin` event starts each transaction
instead. SQLite has one writer at a time, so writes run one at a time, in the order asked, on
the one thread of a `Database`'s write executor with the write engine's one connection: its
writers queue there, not in SQLite's busy handler. A write transaction begins
IMMEDIATE: it takes the database's write lock before its first read, so a transaction that
reads and then writes never fails with "database is locked" because another writer committed
in between. The service's writers in several processes take turns (`write_turns`): each
waits in the kernel for another's write to end, not in SQLite's busy handler, which waits up to
`BUSY_TIMEOUT_S` only for a connection that takes no turns (a migration, another program).
Reads run on `SQLITE_READERS` threads, each with a connection of its own and no `begin`
listener: they begin no transaction, each SELECT reads a consistent snapshot of its own, and in
WAL they never wait for the writer nor it for them. A unit whose caller is cancelled still runs
to its end once started (its wait for a turn included); one still queued never runs.

PostgreSQL: the unit runs through `AsyncSession.run_sync` (SQLAlchemy's bridge from the sync
`Session` API to asyncio), on asyncpg behind one queue pool. Read sessions run in AUTOCOMMIT
(SQLAlchemy's `isolation_level` execution option): no BEGIN and ROLLBACK round trips around a
read. Write sessions are ordinary transactions. A unit whose caller is cancelled stops at its
next statement and is rolled back. A connection the server closed (a restart, an
administrator's `pg_terminate_backend`, an idle timeout) is replaced at checkout instead of
failing a request: the server says so when it closes one, asyncpg marks the connection closed
as the event loop reads that, and the pool's `checkout` listener hands the pool such a
connection back as a `DisconnectionError`, as SQLAlchemy's pool events document, for a fresh
one. It asks the driver, not the server, instead of `pool_pre_ping`'s round trip at every
checkout.
"""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from sqlalchemy import DateTime, Engine, create_engine, event, make_url
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection
from sqlalchemy.types import TypeDecorator

from controlcenter.config import check_database_url
from controlcenter.db.changes import Changes, committed_stamps
from controlcenter.db.text_match import register_sqlite_functions
from controlcenter.db.write_turns import WriteTurns

# How long a SQLite connection waits in SQLite's busy handler for another connection's write
# transaction before it fails: a writer for a connection that takes no turns (`write_turns`),
# a reader for a recovery or a checkpoint.
BUSY_TIMEOUT_S = 30.0
# SQLite's readers: threads, each with a connection of its own (a read never waits for one).
SQLITE_READERS = 8
# PostgreSQL connections kept open per process, and opened beyond them under load: a unit of
# work holds one for a statement or two, never across a provider or CRM call.
POOL_SIZE = 20
POOL_OVERFLOW = 20

P = ParamSpec("P")
T = TypeVar("T")
Committed = Callable[[dict[str, str]], None]


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


class DatabaseClosedError(RuntimeError):
    """A unit of work asked of a SQLite `Database` after `dispose`: its threads are gone for
    good (what retries on failure stops on this one)."""


class _Units(Protocol):
    """How one database runs a unit of work (see the module's docstring)."""

    write_engine: Engine
    read_engine: Engine

    async def read(self, work: Callable[[Session], T]) -> T: ...

    async def write(self, work: Callable[[Session], T], committed: Committed) -> T: ...

    async def dispose(self) -> None: ...


class Database:
    """The one way to run a unit of work (`run_read`, `run_write`), and the process's watch of
    what its caches keep (`changes`). `write_engine` and `read_engine`: the SQLAlchemy engines
    beneath, for engine events."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = check_database_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        # The SQLAlchemy dialect's name, for statements built before a session is opened.
        self.dialect = "sqlite" if self.is_sqlite else "postgresql"
        self._units: _Units = (
            _Sqlite(self.url, echo) if self.is_sqlite else _Postgres(self.url, echo)
        )
        self.write_engine = self._units.write_engine
        self.read_engine = self._units.read_engine
        self.changes = Changes(self.run_read, self.url, is_sqlite=self.is_sqlite)

    async def run_read(
        self, work: Callable[Concatenate[Session, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`work(session, *args, **kwargs)` in a session for reads: each statement reads
        committed data on its own, with no transaction around it (SQLite: no BEGIN, no lock;
        PostgreSQL: autocommit); what it returns."""

        def unit(session: Session) -> T:
            return work(session, *args, **kwargs)

        return await self._units.read(unit)

    async def run_write(
        self, work: Callable[Concatenate[Session, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`work(session, *args, **kwargs)` in a transaction committed when it returns, rolled
        back when it raises; what it returns. The topics it marked changed
        (`changes.mark_changed`) are forgotten by this process's caches as soon as it commits."""

        def unit(session: Session) -> T:
            return work(session, *args, **kwargs)

        return await self._units.write(unit, self.changes.committed)

    async def dispose(self) -> None:
        await self.changes.stop()
        await self._units.dispose()


class _Sqlite:
    def __init__(self, url: str, echo: bool) -> None:
        sync_url = make_url(url).set(drivername="sqlite")
        # sqlite3's `timeout` is SQLite's busy timeout; a pooled connection is used by more
        # than the thread that opened it (by one thread at a time).
        connect = {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
        self.write_engine = create_engine(
            sync_url, echo=echo, pool_size=1, max_overflow=0, connect_args=connect
        )
        self.read_engine = create_engine(
            sync_url, echo=echo, pool_size=SQLITE_READERS, max_overflow=0, connect_args=connect
        )
        configure_sqlite(self.write_engine, writes=True)
        configure_sqlite(self.read_engine, writes=False)
        self._write_sessions = sessionmaker(self.write_engine, expire_on_commit=False)
        self._read_sessions = sessionmaker(self.read_engine, expire_on_commit=False)
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="sqlite-write")
        assert sync_url.database  # check_database_url refuses an in-memory database
        self._turns = WriteTurns(sync_url.database)
        self._readers = ThreadPoolExecutor(SQLITE_READERS, thread_name_prefix="sqlite-read")
        self._disposed = False

    async def read(self, work: Callable[[Session], T]) -> T:
        self._check_open()
        loop = asyncio.get_running_loop()
        # In the caller's context, as `asyncio.to_thread` runs a function: what a unit logs
        # carries the request's id.
        context = contextvars.copy_context()
        return await loop.run_in_executor(self._readers, context.run, self._read, work)

    async def write(self, work: Callable[[Session], T], committed: Committed) -> T:
        self._check_open()
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        return await loop.run_in_executor(
            self._writer, context.run, self._write, loop, committed, work
        )

    def _read(self, work: Callable[[Session], T]) -> T:
        with self._read_sessions() as session:
            return work(session)

    def _write(
        self, loop: asyncio.AbstractEventLoop, committed: Committed, work: Callable[[Session], T]
    ) -> T:
        with self._turns.turn(), self._write_sessions() as session:
            with session.begin():
                result = work(session)
            # Queued on the loop before the caller's wake-up, and run even if the caller was
            # cancelled meanwhile: the process's caches forget what the commit changed. Most
            # writes change no topic, and wake the loop once (with their result), not twice.
            stamps = committed_stamps(session)
            if stamps:
                loop.call_soon_threadsafe(committed, stamps)
        return result

    def _check_open(self) -> None:
        if self._disposed:
            raise DatabaseClosedError("the database was disposed")

    async def dispose(self) -> None:
        self._disposed = True
        await asyncio.to_thread(self._dispose)

    def _dispose(self) -> None:
        self._writer.shutdown()
        self._readers.shutdown()
        self._turns.close()
        self.write_engine.dispose()
        self.read_engine.dispose()


class _Postgres:
    def __init__(self, url: str, echo: bool) -> None:
        engine = create_async_engine(
            url, echo=echo, pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW
        )
        event.listen(engine.sync_engine.pool, "checkout", _refuse_closed)
        # Same pool; the connection's isolation level is restored when it goes back.
        reads = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._engine: AsyncEngine = engine
        self.write_engine = engine.sync_engine
        self.read_engine = reads.sync_engine
        self._write_sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._read_sessions = async_sessionmaker(reads, expire_on_commit=False)

    async def read(self, work: Callable[[Session], T]) -> T:
        async with self._read_sessions() as session:
            return await session.run_sync(work)

    async def write(self, work: Callable[[Session], T], committed: Committed) -> T:
        async with self._write_sessions() as session:
            async with session.begin():
                result = await session.run_sync(work)
            committed(committed_stamps(session.sync_session))
        return result

    async def dispose(self) -> None:
        await self._engine.dispose()


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


def configure_sqlite(engine: Engine, *, writes: bool) -> None:
    """The `connect` and `begin` listeners of SQLAlchemy's SQLite documentation (see the
    module's docstring), with the pragmas every connection needs; `begin` on a write engine
    only. `engine`: a sync engine, or an async engine's `sync_engine`."""

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
