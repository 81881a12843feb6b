"""Engine, sessions and the declarative base.

SQLite goes through SQLAlchemy's aiosqlite dialect, set up for concurrent use as SQLAlchemy's
SQLite documentation describes ("Serializable isolation / Savepoints / Transactional DDL"):
the sqlite3 module's own BEGIN is switched off (`isolation_level = None`) and SQLAlchemy's
`begin` event starts each transaction instead. A write transaction begins IMMEDIATE: it takes
the database's write lock before its first read, so a transaction that reads and then writes
never fails with "database is locked" because another writer committed in between. While
another connection (of this process or another) holds the lock, BEGIN IMMEDIATE waits in
SQLite's busy handler for up to `BUSY_TIMEOUT_S`, inside aiosqlite's thread: the event loop
goes on meanwhile. The journal is WAL, so readers never wait for the writer nor it for them,
and SQLite's automatic checkpoints keep the log short. A read session begins no transaction:
each SELECT reads a consistent snapshot of its own and holds no lock after it.

PostgreSQL uses asyncpg behind a queue pool. A connection the server closed (a restart, an
administrator's `pg_terminate_backend`, an idle timeout) is replaced at checkout instead of
failing a request: the server says so when it closes one, asyncpg marks the connection closed
as the event loop reads that, and the pool's `checkout` listener hands the pool such a
connection back as a `DisconnectionError`, as SQLAlchemy's pool events document, for a fresh
one. It asks the driver, not the server: `pool_pre_ping`'s round trip at every checkout cost
about a third of a short transaction's CPU.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, MetaData, event
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection
from sqlalchemy.types import TypeDecorator

from controlcenter.config import check_database_url
from controlcenter.db.text_match import register_sqlite_functions

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# How long a SQLite writer waits for another connection's write transaction before it fails.
BUSY_TIMEOUT_S = 30.0
# Connections kept open per process, and opened beyond them under load: a unit of work holds
# one for a statement or two, never across a provider or CRM call.
POOL_SIZE = 20
POOL_OVERFLOW = 20
_READ_ONLY = "controlcenter_read_only"  # the execution option of `Database.read`'s sessions


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


class Database:
    """The engine plus the two ways to open a unit of work: `read()` and `write()`."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = check_database_url(url)
        self.is_sqlite = url.startswith("sqlite")
        pool: dict[str, Any] = {"pool_size": POOL_SIZE, "max_overflow": POOL_OVERFLOW}
        if self.is_sqlite:
            # sqlite3's `timeout` is SQLite's busy timeout.
            pool["connect_args"] = {"timeout": BUSY_TIMEOUT_S}
        self.engine: AsyncEngine = create_async_engine(url, echo=echo, **pool)
        if self.is_sqlite:
            _configure_sqlite(self.engine)
        else:
            event.listen(self.engine.sync_engine.pool, "checkout", _refuse_closed)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """A session for reads (on SQLite it begins no transaction and takes no lock)."""
        async with self.sessions() as session:
            if self.is_sqlite:
                await session.connection(execution_options={_READ_ONLY: True})
            yield session

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """A transaction committed when the block ends, rolled back on any exception."""
        async with self.sessions() as session, session.begin():
            yield session

    async def dispose(self) -> None:
        await self.engine.dispose()


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


def _configure_sqlite(engine: AsyncEngine) -> None:
    """The `connect` and `begin` listeners of SQLAlchemy's SQLite documentation (see the
    module's docstring), with the pragmas every connection needs."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's `begin` below starts them
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        # SQLite's advice for WAL: never corrupt, and no sync of the log at each commit.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()
        register_sqlite_functions(dbapi_connection)

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        if not connection.get_execution_options().get(_READ_ONLY, False):
            connection.exec_driver_sql("BEGIN IMMEDIATE")
