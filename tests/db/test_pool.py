"""The PostgreSQL pool replaces a connection the server closed, without a round trip at
checkout."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from controlcenter.db import Database

pytestmark = pytest.mark.postgresql_only


def _scalar(session: Session, sql: str, params: dict[str, Any] | None = None) -> Any:
    return session.scalar(text(sql), params)


async def _backend_pid(db: Database) -> int:
    pid = await db.run_read(_scalar, "SELECT pg_backend_pid()")
    assert isinstance(pid, int)
    return pid


async def _terminated(url: str, pid: int) -> None:
    """The backend ended by another process's connection, and gone from the server's list."""
    other = Database(url)
    try:
        assert await other.run_write(_scalar, "SELECT pg_terminate_backend(:pid)", {"pid": pid})
        while True:
            left = await other.run_read(
                _scalar, "SELECT count(*) FROM pg_stat_activity WHERE pid = :pid", {"pid": pid}
            )
            if left == 0:
                return
            await asyncio.sleep(0.01)
    finally:
        await other.dispose()


async def test_a_connection_the_server_closed_is_replaced_at_checkout(
    database_url: str,
) -> None:
    db = Database(database_url)
    try:
        old = await _backend_pid(db)
        await _terminated(database_url, old)
        # The next unit of work gets a fresh connection instead of the closed one's error.
        new = await _backend_pid(db)
        assert new != old
        assert await db.run_write(_scalar, "SELECT 1") == 1
    finally:
        await db.dispose()


async def test_a_checkout_sends_nothing_to_the_server(database_url: str) -> None:
    """A unit of work on a pooled connection sends its own statements only: no ping first
    (asyncpg logs the statements it sends unprepared: a transaction's BEGIN and COMMIT, and
    the ping's `;` in a transaction of its own), and a read no transaction at all."""
    db = Database(database_url)
    try:
        sent: list[str] = []

        def watch(session: Session) -> None:  # the pool's one open connection
            driver = session.connection().connection.driver_connection
            assert driver is not None
            driver.add_query_logger(lambda record: sent.append(record.query))

        await db.run_read(watch)
        sent.clear()
        await _backend_pid(db)
        assert sent == []  # an autocommit read
        await db.run_write(_scalar, "SELECT 1")
        # One BEGIN (naming the default isolation level once a read used the connection).
        assert len(sent) == 2 and sent[0].startswith("BEGIN") and sent[1] == "COMMIT;"
    finally:
        await db.dispose()
