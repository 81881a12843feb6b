"""SQLite connections that run on the event loop's own thread, behind aiosqlite's interface.

aiosqlite gives every connection a thread and hands each call (cursor, execute, fetch,
commit) to it and back: several hand-offs per statement, each needing the GIL from a loop
that is busy serving streams. Under load that GIL convoy, not SQLite, set the latency (py-spy:
most samples in aiosqlite's threads at 100 concurrent chats). A SQLite statement on an
indexed table takes microseconds, less than one hand-off, so these connections run it inline.

SQLAlchemy's aiosqlite dialect is kept (it is handed these through `async_creator`); only the
thread is gone. What could block the loop is SQLite waiting for a lock held by another
process: writers in this process queue on `Database`'s asyncio lock, WAL readers never wait
for writers, and `Database.write` asks for the write lock without waiting (busy timeout 0
around BEGIN IMMEDIATE) and sleeps asynchronously between attempts. The busy timeout left
for everything else is short (`BUSY_TIMEOUT_MS`).

`SQLITE_DRIVER=aiosqlite` (the configuration) uses aiosqlite itself instead, as a fallback.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

BUSY_TIMEOUT_MS = 100
BUSY_TIMEOUT_ON = f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}"
BUSY_TIMEOUT_OFF = "PRAGMA busy_timeout=0"
# The SQLAlchemy whose aiosqlite adapter this driver was checked against (it reads private
# attributes of aiosqlite's connection): tests/db/test_sqlite_driver_contract.py fails when
# uv.lock moves to another version, until the driver is checked again and this is raised.
CHECKED_WITH_SQLALCHEMY = "2.1.9"


class InlineCursor:
    """aiosqlite's `Cursor`, answered at once."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    async def __aenter__(self) -> InlineCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._cursor.close()

    async def execute(self, sql: str, parameters: Sequence[Any] = ()) -> InlineCursor:
        self._cursor.execute(sql, parameters)
        return self

    async def executemany(self, sql: str, parameters: Iterable[Sequence[Any]]) -> InlineCursor:
        self._cursor.executemany(sql, parameters)
        return self

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._cursor.fetchmany(self._cursor.arraysize if size is None else size)

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def close(self) -> None:
        self._cursor.close()

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    @property
    def arraysize(self) -> int:
        return self._cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._cursor.arraysize = value


class _InlineCalls:
    """Stands in for aiosqlite's call queue, which SQLAlchemy's adapter uses directly to set
    `isolation_level`: the call runs as it is put."""

    __slots__ = ()

    def put_nowait(self, item: tuple[Any, Callable[[], Any]]) -> None:
        future, function = item
        try:
            result = function()
        except BaseException as exc:  # handed to the awaiting caller, as aiosqlite does
            if future is not None:
                future.set_exception(exc)
            return
        if future is not None:
            future.set_result(result)


class InlineConnection:
    """aiosqlite's `Connection`, with its calls made on the calling thread."""

    __slots__ = ("_connection",)
    _tx = _InlineCalls()

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection: sqlite3.Connection | None = connection

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            raise ValueError("no active connection")
        return self._connection

    @property
    def isolation_level(self) -> str | None:
        return self._conn.isolation_level

    def cursor(self) -> InlineCursor:
        return InlineCursor(self._conn.cursor())

    async def execute(self, sql: str, parameters: Sequence[Any] = ()) -> InlineCursor:
        return await self.cursor().execute(sql, parameters)

    async def executemany(self, sql: str, parameters: Iterable[Sequence[Any]]) -> InlineCursor:
        return await self.cursor().executemany(sql, parameters)

    async def commit(self) -> None:
        self._conn.commit()

    def begin(self, *, immediate: bool) -> None:
        """BEGIN, at once: for SQLAlchemy's "begin" event, which cannot await. IMMEDIATE takes
        the write lock or fails at once while another process holds it (busy timeout 0 around
        it), so that the caller waits for it asynchronously instead of in SQLite."""
        connection = self._conn
        if not immediate:
            connection.execute("BEGIN")
            return
        connection.execute(BUSY_TIMEOUT_OFF)
        try:
            connection.execute("BEGIN IMMEDIATE")
        finally:
            connection.execute(BUSY_TIMEOUT_ON)

    async def rollback(self) -> None:
        self._conn.rollback()

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        self._conn.create_function(*args, **kwargs)

    async def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def stop(self) -> None:
        """What SQLAlchemy calls to terminate a connection it cannot close gracefully."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def inline_creator(path: str) -> Callable[[], Any]:
    """An `async_creator` for `create_async_engine`: connections to the database at `path`."""

    async def connect() -> InlineConnection:
        # check_same_thread off: the engine may be disposed from another thread at exit.
        connection = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        return InlineConnection(connection)

    return connect
