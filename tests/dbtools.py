"""Database helpers for tests and benchmarks: sessions of the tests' own for looking at and
setting up rows (`reading`, `writing`), an empty PostgreSQL schema, an API token added in a
caller's transaction, a snapshot of every row, a failure injected by a trigger, the write
transactions committed meanwhile and the reads run meanwhile."""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Literal

from sqlalchemy import event, make_url, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from controlcenter.auth.models import ApiTokenRecord, UserRecord
from controlcenter.auth.tokens import hash_api_token, new_api_token
from controlcenter.db import Database
from controlcenter.db.engine import BUSY_TIMEOUT_S, configure_sqlite
from controlcenter.tables import Base

_TEST_ENGINES: weakref.WeakKeyDictionary[Database, dict[bool, AsyncEngine]] = (
    weakref.WeakKeyDictionary()
)


def _test_engine(db: Database, *, writes: bool) -> AsyncEngine:
    """An engine of the tests' own on `db`'s database, set up as the service's own (SQLite's
    pragmas and IMMEDIATE writes; PostgreSQL's autocommit reads), with no pool: a connection
    per session, opened on the test's event loop."""
    engines = _TEST_ENGINES.setdefault(db, {})
    engine = engines.get(writes)
    if engine is None:
        if db.is_sqlite:
            engine = create_async_engine(
                db.url, poolclass=NullPool, connect_args={"timeout": BUSY_TIMEOUT_S}
            )
            configure_sqlite(engine.sync_engine, writes=writes)
        else:
            engine = create_async_engine(db.url, poolclass=NullPool)
            if not writes:
                engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        engines[writes] = engine
    return engine


@asynccontextmanager
async def reading(db: Database) -> AsyncIterator[AsyncSession]:
    """A session for looking at what the service stored (the service's own units of work run
    through `Database.run_read` and `run_write`)."""
    async with AsyncSession(_test_engine(db, writes=False), expire_on_commit=False) as session:
        yield session


@asynccontextmanager
async def writing(db: Database) -> AsyncIterator[AsyncSession]:
    """A transaction for setting up what a test needs, committed when the block ends. Caches
    learn of it as of any other process's write: mark a topic changed with `run_write` when a
    test needs this process's caches to forget at once."""
    engine = _test_engine(db, writes=True)
    async with AsyncSession(engine, expire_on_commit=False) as session, session.begin():
        yield session


async def reset_postgres(url: str) -> None:
    """Drop everything in the database at `url` (a throwaway test or benchmark server)."""
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.execute(text("DROP SCHEMA public CASCADE"))
        await conn.execute(text("CREATE SCHEMA public"))
    await engine.dispose()


async def worker_database(url: str, worker: str) -> str:
    """An empty database for the pytest-xdist worker named `worker` on the server at `url`:
    `url`'s own database outside xdist, else one named after it and the worker, made anew, so
    that workers share no rows and no notifications."""
    if not worker:
        await reset_postgres(url)
        return url
    base = make_url(url)
    name = f"{base.database}_{worker}"
    engine = create_async_engine(base, isolation_level="AUTOCOMMIT")
    async with engine.connect() as conn:
        await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
    await engine.dispose()
    return base.set(database=name).render_as_string(hide_password=False)


def create_api_token(session: Session, user: UserRecord, label: str = "") -> str:
    """A new token of `user` stored (its hash) in the transaction of `session`; its secret."""
    token = new_api_token()
    session.add(ApiTokenRecord(user_id=user.id, label=label, token_hash=hash_api_token(token)))
    session.flush()
    return token


_BOOKKEEPING = {"last_used_at"}


async def snapshot(db: Database) -> dict[str, list[str]]:
    """Every row of every table, order-independent, for "nothing changed" assertions.

    Bookkeeping that merely using a credential updates (`api_tokens.last_used_at`) is left out.
    """
    rows: dict[str, list[str]] = {}
    async with reading(db) as session:
        for table in Base.metadata.sorted_tables:
            columns = [column for column in table.c if column.name not in _BOOKKEEPING]
            result = await session.execute(select(*columns))
            rows[table.name] = sorted(repr(tuple(row)) for row in result)
    return rows


@asynccontextmanager
async def failing_write(
    db: Database, table: str, when: str, *, on: Literal["INSERT", "UPDATE"] = "INSERT"
) -> AsyncIterator[None]:
    """Make the database itself refuse an INSERT (or an UPDATE: `on`) of `table`'s rows
    matching `when` (SQL on NEW, and on OLD for an UPDATE), so a request fails half-way through
    its transaction without patching any code."""
    name = f"cc_test_fail_{table}"
    statements: list[str]
    if db.is_sqlite:
        statements = [
            f"CREATE TRIGGER {name} AFTER {on} ON {table} WHEN {when} "
            "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
        ]
        cleanup = [f"DROP TRIGGER {name}"]
    else:
        statements = [
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'injected failure'; END $$",
            f"CREATE TRIGGER {name} AFTER {on} ON {table} FOR EACH ROW WHEN ({when}) "
            f"EXECUTE FUNCTION {name}()",
        ]
        cleanup = [f"DROP TRIGGER {name} ON {table}", f"DROP FUNCTION {name}()"]
    await _run(db, statements)
    try:
        yield
    finally:
        await _run(db, cleanup)


async def _run(db: Database, statements: list[str]) -> None:
    async with writing(db) as session:
        for statement in statements:
            await session.execute(text(statement))


def cookie(token: str) -> dict[str, Any]:
    """The session cookie as a header, so one shared client can act as several users."""
    return {"Cookie": f"session={token}"}


@contextmanager
def committed_writes(db: Database) -> Iterator[list[list[str]]]:
    """The statements of each write transaction committed on `db` meanwhile, in the order of
    their commits, as SQLAlchemy's engine events (`begin`, `before_cursor_execute`, `commit`,
    `rollback`) show them. Reads are left out: on SQLite they go through an engine of their
    own, on PostgreSQL they run in AUTOCOMMIT."""
    engine = db.write_engine
    open_: dict[Connection, list[str]] = {}
    committed: list[list[str]] = []

    def begun(conn: Connection) -> None:
        if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
            open_[conn] = []

    def executed(conn: Connection, _cursor: Any, statement: str, *_: Any) -> None:
        if conn in open_:
            open_[conn].append(statement)

    def commit(conn: Connection) -> None:
        if conn in open_:
            committed.append(open_.pop(conn))

    def rollback(conn: Connection) -> None:
        open_.pop(conn, None)

    listeners: list[tuple[str, Callable[..., None]]] = [
        ("begin", begun),
        ("before_cursor_execute", executed),
        ("commit", commit),
        ("rollback", rollback),
    ]
    for name, listener in listeners:
        event.listen(engine, name, listener)
    try:
        yield committed
    finally:
        for name, listener in listeners:
            event.remove(engine, name, listener)


@contextmanager
def reads(db: Database) -> Iterator[list[str]]:
    """The statements `db` ran as reads meanwhile (`Database.run_read`: on SQLite through its
    read engine, on PostgreSQL in AUTOCOMMIT on the one pool), as SQLAlchemy's
    `before_cursor_execute` event shows them."""
    seen: list[str] = []

    def executed(conn: Connection, _cursor: Any, statement: str, *_: Any) -> None:
        if db.is_sqlite or conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
            seen.append(statement)

    engine = db.read_engine if db.is_sqlite else db.write_engine  # which sees both on PostgreSQL
    event.listen(engine, "before_cursor_execute", executed)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", executed)
