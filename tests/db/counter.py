"""A read-modify-write unit of work: the pattern that fails with "database is locked" when a
deferred transaction tries to upgrade its read lock while another connection writes."""

from __future__ import annotations

from sqlalchemy import text

from controlcenter.db import Database

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO counter (id, n) VALUES (1, 0)",
    "CREATE TABLE IF NOT EXISTS writes (id INTEGER PRIMARY KEY AUTOINCREMENT, who TEXT)",
)


def open_database(url: str) -> Database:
    return Database(url)


async def create_schema(database: Database) -> None:
    async with database.write() as db:
        for statement in SCHEMA:
            await db.execute(text(statement))


async def increment(database: Database, who: str) -> None:
    async with database.write() as db:
        current = (await db.execute(text("SELECT n FROM counter WHERE id = 1"))).scalar_one()
        await db.execute(text("UPDATE counter SET n = :n WHERE id = 1"), {"n": current + 1})
        await db.execute(text("INSERT INTO writes (who) VALUES (:who)"), {"who": who})
