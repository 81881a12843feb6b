"""Database helpers for tests and benchmarks: an empty PostgreSQL schema, an API token added
in a caller's transaction, a snapshot of every row, and a failure injected by a trigger."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from controlcenter.auth.models import ApiTokenRecord, UserRecord
from controlcenter.auth.tokens import hash_api_token, new_api_token
from controlcenter.db import Database
from controlcenter.tables import Base


async def reset_postgres(url: str) -> None:
    """Drop everything in the database at `url` (a throwaway test or benchmark server)."""
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.execute(text("DROP SCHEMA public CASCADE"))
        await conn.execute(text("CREATE SCHEMA public"))
    await engine.dispose()


async def create_api_token(db: AsyncSession, user: UserRecord, label: str = "") -> str:
    """A new token of `user` stored (its hash) in the transaction of `db`; its secret."""
    token = new_api_token()
    db.add(ApiTokenRecord(user_id=user.id, label=label, token_hash=hash_api_token(token)))
    await db.flush()
    return token


_BOOKKEEPING = {"last_used_at"}


async def snapshot(db: Database) -> dict[str, list[str]]:
    """Every row of every table, order-independent, for "nothing changed" assertions.

    Bookkeeping that merely using a credential updates (`api_tokens.last_used_at`) is left out.
    """
    rows: dict[str, list[str]] = {}
    async with db.read() as session:
        for table in Base.metadata.sorted_tables:
            columns = [column for column in table.c if column.name not in _BOOKKEEPING]
            result = await session.execute(select(*columns))
            rows[table.name] = sorted(repr(tuple(row)) for row in result)
    return rows


@asynccontextmanager
async def failing_insert(db: Database, table: str, when: str) -> AsyncIterator[None]:
    """Make the database itself refuse an INSERT into `table` for rows matching `when` (SQL on
    NEW), so a request fails half-way through its transaction without patching any code."""
    name = f"cc_test_fail_{table}"
    statements: list[str]
    if db.is_sqlite:
        statements = [
            f"CREATE TRIGGER {name} AFTER INSERT ON {table} WHEN {when} "
            "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
        ]
        cleanup = [f"DROP TRIGGER {name}"]
    else:
        statements = [
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'injected failure'; END $$",
            f"CREATE TRIGGER {name} AFTER INSERT ON {table} FOR EACH ROW WHEN ({when}) "
            f"EXECUTE FUNCTION {name}()",
        ]
        cleanup = [f"DROP TRIGGER {name} ON {table}", f"DROP FUNCTION {name}()"]
    await _run(db, statements)
    try:
        yield
    finally:
        await _run(db, cleanup)


async def _run(db: Database, statements: list[str]) -> None:
    async with db.write() as session:
        for statement in statements:
            await session.execute(text(statement))


def cookie(token: str) -> dict[str, Any]:
    """The session cookie as a header, so one shared client can act as several users."""
    return {"Cookie": f"session={token}"}
