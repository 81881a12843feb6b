"""Single-row reads that skip SQLAlchemy's engine: the lookups made on every request
(authentication).

Each is a Core `select()` built from the tables (`Lookup`), so its columns and conditions can
never drift from the models. It is compiled once per dialect, with the column types' result
processors, and then only executed: the statement text, its parameters' order and the
processors are kept, so a request pays neither for compilation nor for SQLAlchemy's
execution machinery.

Checking a connection out of SQLAlchemy's pool and back costs more than the statement itself
(about 160 us against 10 us on SQLite), so these keep connections of their own at the driver:
one SQLite connection used synchronously on the loop's thread (each lookup runs start to end
without yielding, so one connection serves all of them), or a small asyncpg pool. Read-only
by construction: the SQLite connection is `query_only`, and a `Lookup` is a SELECT.

On SQLite a row read is answered again without its statement for as long as nothing has been
written to the database since: SQLite's `PRAGMA data_version` changes on this connection as
soon as any other connection (of this process or another) commits a change, and costs ~4 us
against ~28 us for the statement and its row (`make bench`'s dashboard: most requests of a
read-mostly service). A row is kept with the data version read before its statement ran, so
it is never older than that version; every kept row is dropped when the version moves, so a
logout, a disabled account or a saved setting is seen at the next lookup, as without it.
Rows are pure functions of the database (no lookup reads the clock), and what depends on the
time (a session's expiry) is checked by the caller on every request.

On PostgreSQL a lookup with parameters is answered in batches with the same lookup of the
other requests waiting at that moment (`lookup_batches`).
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import sqlite3
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import Dialect, make_url

from controlcenter.config import check_database_url
from controlcenter.db.lookup_batches import LookupBatches, batched_statement
from controlcenter.db.sqlite_driver import BUSY_TIMEOUT_MS

POSTGRES_LOOKUP_CONNECTIONS = 10
ROWS_KEPT = 4096  # SQLite: rows answered again while nothing is written (all dropped past it)

Row = tuple[Any, ...]


@dataclass(frozen=True)
class CompiledLookup:
    """One lookup in one dialect: its text, where each parameter goes, and how each column's
    value is read (None where the driver's value is already the model's)."""

    sql: str
    order: tuple[str, ...]
    fixed: dict[str, Any]  # the values the statement itself holds (LIMIT's)
    processors: tuple[tuple[int, Callable[[Any], Any]], ...]  # (column, processor)

    def parameters(self, given: dict[str, Any]) -> list[Any]:
        return [given[name] if name in given else self.fixed[name] for name in self.order]

    def row(self, values: Row) -> Row:
        if not self.processors:
            return values
        out = list(values)
        for index, process in self.processors:
            if out[index] is not None:
                out[index] = process(out[index])
        return tuple(out)


class Lookup:
    """A read-only statement answered by its first row, compiled once per dialect.

    `secret=True`: its parameters carry a digest of what a caller sent as a secret (which
    may be a password), so a row kept for SQLite's unchanged database is kept under a keyed
    hash of them (a MAC, with a key of this process's own), never under the values."""

    def __init__(self, statement: Select[Any], *, secret: bool = False) -> None:
        self.statement = statement
        self.secret = secret
        self._compiled: dict[str, CompiledLookup] = {}
        self._batched: dict[str, CompiledLookup | None] = {}

    def compiled(self, dialect: Dialect) -> CompiledLookup:
        found = self._compiled.get(dialect.name)
        if found is None:
            found = self._compiled[dialect.name] = _compile(self.statement, dialect)
        return found

    def batched(self, dialect: Dialect) -> CompiledLookup | None:
        """The statement for many keys at once (`lookup_batches`), None without parameters."""
        if dialect.name not in self._batched:
            statement = batched_statement(self.statement)
            self._batched[dialect.name] = (
                None if statement is None else _compile(statement, dialect)
            )
        return self._batched[dialect.name]


def _compile(statement: Select[Any], dialect: Dialect) -> CompiledLookup:
    compiled = statement.compile(dialect=dialect)
    assert compiled.positiontup is not None, "lookups compile for positional drivers"
    processors = (
        (index, column.type.dialect_impl(dialect).result_processor(dialect, None))
        for index, column in enumerate(statement.selected_columns)
    )
    return CompiledLookup(
        sql=compiled.string,
        order=tuple(compiled.positiontup),
        fixed={name: bind.value for name, bind in compiled.binds.items() if not bind.required},
        processors=tuple((index, p) for index, p in processors if p is not None),
    )


class Lookups:
    def __init__(self, url: str) -> None:
        parsed = make_url(check_database_url(url))
        self._sqlite_path = parsed.database if url.startswith("sqlite") else None
        self._postgres_dsn = (
            None
            if self._sqlite_path is not None
            else parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        )
        # The dialects of the drivers these connections use (`?` and `$1` placeholders).
        self._dialect: Dialect = (
            SQLiteDialect_pysqlite() if self._sqlite_path is not None else PGDialect_asyncpg()  # type: ignore[no-untyped-call]  # SQLAlchemy's own
        )
        self._sqlite: sqlite3.Connection | None = None
        # SQLite: the rows read since the database last changed, and that data version.
        self._kept: dict[tuple[Lookup, tuple[Any, ...]], Row | None] = {}
        self._kept_version: int | None = None
        self._postgres: Any = None  # asyncpg.Pool, created on first use in the running loop
        self._opening = asyncio.Lock()
        self._batches: weakref.WeakKeyDictionary[Lookup, LookupBatches] = (
            weakref.WeakKeyDictionary()
        )

    async def one(self, lookup: Lookup, **parameters: Any) -> Row | None:
        """The first row of `lookup` with its named parameters, each column read as the model
        reads it, or None."""
        if self._sqlite_path is None:
            batches = self._batches.get(lookup) or self._postgres_batches(lookup)
            if batches is not None:
                return await batches.one(parameters)
        compiled = lookup.compiled(self._dialect)
        values = compiled.parameters(parameters)
        if self._sqlite_path is not None:
            return self._sqlite_one(lookup, compiled, values)
        pool = self._postgres or await self._open_postgres()
        record = await pool.fetchrow(compiled.sql, *values)
        return compiled.row(tuple(record)) if record is not None else None

    def _sqlite_one(
        self, lookup: Lookup, compiled: CompiledLookup, values: list[Any]
    ) -> Row | None:
        connection = self._sqlite_connection()
        version = _one_value(connection, "PRAGMA data_version")
        if version != self._kept_version:
            self._kept.clear()
            self._kept_version = version
        key = (lookup, _hidden(values) if lookup.secret else tuple(values))
        if key in self._kept:
            return self._kept[key]
        cursor = connection.execute(compiled.sql, values)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()  # ends the statement, so no read snapshot outlives the lookup
        found = compiled.row(row) if row is not None else None
        if len(self._kept) >= ROWS_KEPT:
            self._kept.clear()
        self._kept[key] = found
        return found

    def _postgres_batches(self, lookup: Lookup) -> LookupBatches | None:
        compiled = lookup.batched(self._dialect)
        if compiled is None:
            return None

        async def fetch(arrays: dict[str, Any]) -> list[Row]:
            pool = self._postgres or await self._open_postgres()
            records = await pool.fetch(compiled.sql, *compiled.parameters(arrays))
            return [compiled.row(tuple(record)) for record in records]

        names = tuple(name for name in compiled.order if name not in compiled.fixed)
        batches = self._batches[lookup] = LookupBatches(names, fetch)
        return batches

    def _sqlite_connection(self) -> sqlite3.Connection:
        if self._sqlite is None:
            assert self._sqlite_path is not None
            connection = sqlite3.connect(
                self._sqlite_path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            connection.execute("PRAGMA query_only=1")
            # A new connection's data versions are its own: what was kept is not comparable.
            self._kept.clear()
            self._kept_version = None
            self._sqlite = connection
        return self._sqlite

    async def _open_postgres(self) -> Any:
        import asyncpg  # type: ignore[import-untyped]  # loaded by PostgreSQL deployments only

        async with self._opening:
            if self._postgres is None:
                self._postgres = await asyncpg.create_pool(
                    self._postgres_dsn,
                    min_size=1,
                    max_size=POSTGRES_LOOKUP_CONNECTIONS,
                    reset=_keep_session,
                )
        return self._postgres

    async def open(self) -> None:
        """PostgreSQL: the pool, now rather than at the first lookup."""
        if self._sqlite_path is None and self._postgres is None:
            await self._open_postgres()

    async def close(self) -> None:
        if self._sqlite is not None:
            self._sqlite.close()
            self._sqlite = None
        if self._postgres is not None:
            await self._postgres.close()
            self._postgres = None


_KEY = secrets.token_bytes(32)  # made when the process starts, never stored


def _hidden(values: list[Any]) -> tuple[bytes]:
    # BLAKE2b's keyed mode, a MAC: a third of HMAC-SHA256's CPU (as `auth/verified.py`).
    return (hashlib.blake2b(repr(values).encode(), key=_KEY, digest_size=32).digest(),)


def _one_value(connection: sqlite3.Connection, sql: str) -> Any:
    cursor = connection.execute(sql)
    try:
        return cursor.fetchone()[0]
    finally:
        cursor.close()


async def _keep_session(connection: Any) -> None:
    """What the lookups' pool does to a connection given back, instead of asyncpg's default
    reset: nothing. The default sends `SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
    RESET ALL` after every use, a second round trip per lookup that cost as much as the
    lookup itself (py-spy, `make bench` on PostgreSQL: a quarter of the service's samples).
    These connections only ever run a `Lookup`'s SELECT outside a transaction, so there is
    no lock, cursor, listener or setting to undo; an open transaction would still be rolled
    back, which asyncpg does before calling this."""
