"""A read-modify-write unit of work: the pattern that fails with "database is locked" when a
deferred transaction tries to upgrade its read lock while another connection writes."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

from controlcenter.db import Database

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO counter (id, n) VALUES (1, 0)",
    "CREATE TABLE IF NOT EXISTS writes (id INTEGER PRIMARY KEY AUTOINCREMENT, who TEXT)",
)


def open_database(url: str) -> Database:
    return Database(url)


def _create(session: Session) -> None:
    for statement in SCHEMA:
        session.execute(text(statement))


async def create_schema(database: Database) -> None:
    await database.run_write(_create)


def increment_in(session: Session, who: str) -> None:
    current = session.execute(text("SELECT n FROM counter WHERE id = 1")).scalar_one()
    session.execute(text("UPDATE counter SET n = :n WHERE id = 1"), {"n": current + 1})
    session.execute(text("INSERT INTO writes (who) VALUES (:who)"), {"who": who})


async def increment(database: Database, who: str) -> None:
    await database.run_write(increment_in, who)


def counted(session: Session) -> tuple[int, int]:
    """The counter, and how many writes were recorded."""
    n = session.execute(text("SELECT n FROM counter")).scalar_one()
    return n, session.execute(text("SELECT count(*) FROM writes")).scalar_one()
