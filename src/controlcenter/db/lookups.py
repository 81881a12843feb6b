"""Single-row reads that skip SQLAlchemy: the lookups made on every request (authentication).

Checking a connection out of SQLAlchemy's pool and back costs more than the statement itself
(about 160 us against 10 us on SQLite), so these keep connections of their own at the driver:
one SQLite connection used synchronously on the loop's thread (each lookup runs start to end
without yielding, so one connection serves all of them), or a small asyncpg pool. Read-only
by construction: the SQLite connection is `query_only`, and callers pass SELECTs.
"""

from __future__ import annotations

import asyncio
import sqlite3
from functools import lru_cache
from typing import Any

from sqlalchemy.engine import make_url

from controlcenter.config import check_database_url
from controlcenter.db.sqlite_driver import BUSY_TIMEOUT_MS

POSTGRES_LOOKUP_CONNECTIONS = 10


class Lookups:
    def __init__(self, url: str) -> None:
        parsed = make_url(check_database_url(url))
        self._sqlite_path = parsed.database if url.startswith("sqlite") else None
        self._postgres_dsn = (
            None
            if self._sqlite_path is not None
            else parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        )
        self._sqlite: sqlite3.Connection | None = None
        self._postgres: Any = None  # asyncpg.Pool, created on first use in the running loop
        self._opening = asyncio.Lock()

    async def one(self, sql: str, *params: Any) -> tuple[Any, ...] | None:
        """The first row of `sql` (written with `?` placeholders), or None."""
        if self._sqlite_path is not None:
            cursor = self._sqlite_connection().execute(sql, params)
            try:
                row: tuple[Any, ...] | None = cursor.fetchone()
            finally:
                cursor.close()  # ends the statement, so no read snapshot outlives the lookup
            return row
        pool = self._postgres or await self._open_postgres()
        record = await pool.fetchrow(_numbered(sql), *params)
        return tuple(record) if record is not None else None

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
            self._sqlite = connection
        return self._sqlite

    async def _open_postgres(self) -> Any:
        import asyncpg  # type: ignore[import-untyped]  # loaded by PostgreSQL deployments only

        async with self._opening:
            if self._postgres is None:
                self._postgres = await asyncpg.create_pool(
                    self._postgres_dsn, min_size=1, max_size=POSTGRES_LOOKUP_CONNECTIONS
                )
        return self._postgres

    async def close(self) -> None:
        if self._sqlite is not None:
            self._sqlite.close()
            self._sqlite = None
        if self._postgres is not None:
            await self._postgres.close()
            self._postgres = None


@lru_cache(maxsize=64)
def _numbered(sql: str) -> str:
    """`?` placeholders as PostgreSQL's `$1`, `$2`... (the statements have no `?` literals)."""
    parts = sql.split("?")
    return "".join(f"{part}${i}" for i, part in enumerate(parts[:-1], 1)) + parts[-1]
