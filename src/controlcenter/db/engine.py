"""Engine, sessions and the declarative base.

SQLite is the embedded default, so it is tuned to behave under concurrency: WAL journal,
connections that run on the event loop's thread (`sqlite_driver`), and write transactions that
start with BEGIN IMMEDIATE behind an in-process lock. A deferred transaction that reads and
then writes can fail at once with "database is locked" when another writer got in between;
taking the write lock up front avoids that. When another process holds it, the attempt fails
at once and is retried after an asynchronous sleep, so the loop never waits in SQLite's busy
handler. Reads start no transaction at all (autocommit): each SELECT sees a consistent
snapshot of its own.

On PostgreSQL the pool is sized for many concurrent short units of work (the chat path holds a
connection only for a statement or two, never across a provider or tool call); connections are
recycled by age instead of pinged on every checkout, which cost a round trip per unit of work.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import DateTime, MetaData, event
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.types import TypeDecorator

from controlcenter.db.checkpoints import OFF as CHECKPOINTS_OFF
from controlcenter.db.checkpoints import Checkpoints
from controlcenter.db.held_connection import HeldConnection
from controlcenter.db.lookups import POSTGRES_LOOKUP_CONNECTIONS, Lookup, Lookups
from controlcenter.db.sqlite_driver import (
    BUSY_TIMEOUT_OFF,
    BUSY_TIMEOUT_ON,
    InlineConnection,
    inline_creator,
)
from controlcenter.db.write_turn import WriteTurn

T = TypeVar("T")

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


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


_IMMEDIATE = "controlcenter_immediate"
_READ_ONLY = "controlcenter_read_only"
CONNECTIONS_PER_PROCESS = 100  # PostgreSQL's default max_connections, lookups included
POOL_SIZE = 64  # kept open: a smaller pool than the load opens and closes connections
THREAD_CONNECTIONS = 1  # kept by a thread of the process with its own engine (chat heartbeat)
POOL_OVERFLOW = (
    CONNECTIONS_PER_PROCESS - POOL_SIZE - POSTGRES_LOOKUP_CONNECTIONS - THREAD_CONNECTIONS
)
POOL_RECYCLE_S = 1800
# Opened at start-up by `Database.warm` (PostgreSQL): a burst's worth, kept by the pool.
WARM_CONNECTIONS = 8
WRITE_LOCK_WAIT_S = 30.0  # how long a writer waits for another process's write transaction


class Database:
    """The engine plus the two ways to open a unit of work: `read()` and `write()`."""

    def __init__(
        self,
        url: str,
        *,
        echo: bool = False,
        sqlite_driver: str = "inline",
        checkpoints_in_thread: bool = False,
    ) -> None:
        """`sqlite_driver`: "inline" (the project's driver, on the loop's thread) or
        "aiosqlite" (aiosqlite's threads, the fallback). `checkpoints_in_thread` (SQLite, the
        service's): the connections' commits never checkpoint the write-ahead log, a thread
        started here and stopped by `dispose` does (`db/checkpoints.py`)."""
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self._checkpoints = (
            Checkpoints(str(make_url(url).database))
            if self.is_sqlite and checkpoints_in_thread
            else None
        )
        kwargs: dict[str, Any] = {"echo": echo}
        self._lookups = Lookups(url)  # first: it refuses an in-memory SQLite database
        # SQLite's inline connections cost no thread, so it holds as many as PostgreSQL:
        # a pool smaller than the concurrency opens and closes connections all the time.
        kwargs.update(pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW)
        if self.is_sqlite and sqlite_driver == "inline":
            kwargs["async_creator"] = inline_creator(str(make_url(url).database))
        else:
            kwargs["pool_recycle"] = POOL_RECYCLE_S
        self.engine: AsyncEngine = create_async_engine(url, **kwargs)
        if self.is_sqlite:
            _tune_sqlite(self.engine, checkpoints=self._checkpoints is not None)
        if self._checkpoints is not None:
            self._checkpoints.start()
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        # `write_driver`'s. On SQLite it never waits in SQLite's sleeping busy handler: BEGIN
        # IMMEDIATE fails at once while another process writes (`_holding_write_lock` tries
        # again), and once it holds the write lock nothing in a WAL database waits. Set once,
        # not around each transaction (two statements of every window of the event writer).
        self._held = (
            HeldConnection(
                self.engine,
                setup=partial(_driver_statement, sql=BUSY_TIMEOUT_OFF),
                reset=partial(_driver_statement, sql=BUSY_TIMEOUT_ON),
            )
            if self.is_sqlite
            else HeldConnection(self.engine)
        )
        # One writer at a time inside this process: queue in asyncio instead of in
        # SQLite's sleeping busy handler; between processes, an advisory lock (`write_turn`).
        self._write_lock = asyncio.Lock() if self.is_sqlite else None
        self._turn = (
            WriteTurn(f"{make_url(url).database}.write-turn")
            if self.is_sqlite and make_url(url).database not in (None, "", ":memory:")
            else None
        )

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with self.sessions() as session:
            if self.is_sqlite:
                await session.connection(execution_options={_READ_ONLY: True})
            yield session

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """A transaction committed when the block ends, rolled back on any exception."""
        if self._write_lock is None:
            async with self.sessions() as session, session.begin():
                yield session
            return
        async with self._writer():
            session = await self._begin_immediate()
            async with session:
                try:
                    yield session
                except BaseException:
                    await session.rollback()
                    raise
                await session.commit()

    @asynccontextmanager
    async def write_driver(self) -> AsyncIterator[Any]:
        """The database driver's own connection, for a write in the driver's SQL: no
        SQLAlchemy statement, result, session or transaction object, whose bookkeeping cost
        more than the statements of the chat's event writer (a three-row insert: ~0.3 ms of
        CPU through a SQLAlchemy connection, ~0.13 ms through this on SQLite; ~0.7 against
        ~0.2 ms on PostgreSQL, which also saves the round trips of BEGIN and COMMIT). The
        connection is one this process holds (`held_connection`), not taken from the pool
        and given back each time.

        SQLite: an aiosqlite-style connection (`sqlite_driver.InlineConnection`, or
        aiosqlite's) in a transaction begun as `write()` begins its own (this process's turn,
        then BEGIN IMMEDIATE), committed when the block ends, rolled back on any exception.
        PostgreSQL: asyncpg's connection in autocommit: each statement is its own transaction,
        so the caller writes one statement (data-modifying CTEs for several changes); while
        the held one is in use, another caller gets a pooled connection of its own."""
        if self._write_lock is None:
            if self._held.in_use:  # PostgreSQL: a pooled connection meanwhile
                async with self._pooled_driver() as driver:
                    yield driver
                return
            async with self._held.use() as driver:
                yield driver
            return
        # SQLite: this process's writers take turns, so the held connection is always free.
        async with self._writer(), self._held.use() as driver:
            await self._holding_write_lock(partial(self._driver_immediate, driver))
            try:
                yield driver
                await driver.commit()
            except BaseException:
                await driver.rollback()
                raise

    @asynccontextmanager
    async def _pooled_driver(self) -> AsyncIterator[Any]:
        """PostgreSQL: the driver's connection of a pooled connection, for one statement."""
        async with self.engine.connect() as connection:
            driver = await driver_of(connection)
            try:
                yield driver
            except BaseException as exc:
                if driver.is_closed() or isinstance(exc, asyncio.CancelledError):
                    # Lost, or cut in the middle of a statement: not for the next user.
                    await connection.invalidate()
                raise

    @asynccontextmanager
    async def _writer(self) -> AsyncIterator[None]:
        """This process's turn to write SQLite: first among its own writers (the asyncio
        lock), then among the processes sharing the file (`write_turn`)."""
        assert self._write_lock is not None
        async with self._write_lock:
            if self._turn is None:
                yield
                return
            await self._turn.take(WRITE_LOCK_WAIT_S)
            try:
                yield
            finally:
                self._turn.give_back()

    async def _begin_immediate(self) -> AsyncSession:
        """A session holding SQLite's write lock, waited for without blocking the loop."""
        return await self._holding_write_lock(self._session_immediate)

    async def _session_immediate(self) -> AsyncSession:
        session = self.sessions()
        try:
            await session.connection(execution_options={_IMMEDIATE: True})
        except BaseException:
            await session.close()
            raise
        return session

    async def _driver_immediate(self, driver: Any) -> None:
        """BEGIN IMMEDIATE on the held connection, failing at once while another process
        writes (its busy timeout is 0: `_holding_write_lock` tries again)."""
        await _driver_statement(driver, "BEGIN IMMEDIATE")

    async def _holding_write_lock(self, begin: Callable[[], Awaitable[T]]) -> T:
        """What `begin` opens, once it holds SQLite's write lock (BEGIN IMMEDIATE); while
        another process holds it, tried again after an asynchronous sleep."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WRITE_LOCK_WAIT_S
        delay = 0.001
        while True:
            try:
                return await begin()
            except (OperationalError, sqlite3.OperationalError) as exc:
                # SQLAlchemy's error wraps the driver's; a driver connection raises its own.
                cause = exc.orig if isinstance(exc, OperationalError) else exc
                if "locked" not in str(cause) or loop.time() >= deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    async def lookup(self, lookup: Lookup, **parameters: Any) -> tuple[Any, ...] | None:
        """The first row of a per-request lookup (`lookups`) with its named parameters, each
        column read as the model reads it, or None."""
        return await self._lookups.one(lookup, **parameters)

    async def warm(self, connections: int = WARM_CONNECTIONS) -> None:
        """On PostgreSQL, open now the connections that the first burst of requests after
        start-up would otherwise open while they wait: the lookups' pool, the held one and
        `connections` pooled ones, which the pool keeps (`POOL_SIZE`). Each costs a server
        process, authentication and the driver's set-up: the slowest of the first 16
        onboarding saves after a start took 193-225 ms without this, 134-179 ms with it (the
        rest is each server process's first statements on cold catalog caches; BENCHMARKS.md).
        A SQLite connection is a file opened on the loop's thread: nothing to do. Raises what
        opening a connection raises, after closing those it opened."""
        if self.is_sqlite:
            return
        await self._lookups.open()
        if not self._held.in_use:
            async with self._held.use():
                pass
        opened = await asyncio.gather(
            *(self.engine.connect().start() for _ in range(connections)), return_exceptions=True
        )
        for connection in opened:
            if isinstance(connection, AsyncConnection):
                await connection.close()  # back to the pool, which keeps it open
        for failure in opened:
            if isinstance(failure, BaseException):
                raise failure

    async def dispose(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.stop()
        await self._held.close()
        await self._lookups.close()
        await self.engine.dispose()
        if self._turn is not None:
            self._turn.close()


async def driver_of(connection: AsyncConnection) -> Any:
    """The driver's own connection under a SQLAlchemy one (asyncpg's, or an aiosqlite-style
    one): statements on it join the transaction `connection` is in."""
    driver = (await connection.get_raw_connection()).driver_connection
    if driver is None:
        raise RuntimeError("the connection was closed")
    return driver


def refused_row(exc: BaseException) -> bool:
    """The database refused a row for one of its constraints (a key taken, a foreign key
    missing), whichever layer raised it: SQLAlchemy, the sqlite3 module (the SQLite drivers'
    own connections) or asyncpg (SQLSTATE class 23, read without importing asyncpg)."""
    if isinstance(exc, (IntegrityError, sqlite3.IntegrityError)):
        return True
    return str(getattr(exc, "sqlstate", "")).startswith("23")


def as_utc(value: datetime | str | None) -> datetime | None:
    """A timestamp as an aware UTC datetime (SQLite's driver gives naive UTC text)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


async def _driver_statement(driver: Any, sql: str) -> None:
    """One statement on an aiosqlite-style connection, its cursor closed."""
    cursor = await driver.execute(sql)
    await cursor.close()


def _tune_sqlite(engine: AsyncEngine, *, checkpoints: bool) -> None:
    """`checkpoints`: a thread checkpoints the log, the connections' commits never do."""
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        # Let SQLAlchemy's "begin" event below decide how transactions start.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(BUSY_TIMEOUT_ON)
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        if checkpoints:
            cursor.execute(CHECKPOINTS_OFF)
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        options = conn.get_execution_options()
        if options.get(_READ_ONLY, False):
            return  # autocommit: see the module docstring
        driver = conn.connection.driver_connection
        if isinstance(driver, InlineConnection):
            # Straight on SQLite's connection: through SQLAlchemy's execution context, BEGIN
            # IMMEDIATE and its two busy timeouts were a third of an empty write
            # transaction's CPU (~0.1 ms of every `write()`).
            driver.begin(immediate=options.get(_IMMEDIATE, False))
            return
        if not options.get(_IMMEDIATE, False):
            conn.exec_driver_sql("BEGIN")
            return
        # Fail at once when another process writes: `Database.write` retries asynchronously.
        conn.exec_driver_sql(BUSY_TIMEOUT_OFF)
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        finally:
            conn.exec_driver_sql(BUSY_TIMEOUT_ON)
