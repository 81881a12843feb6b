"""A save on SQLite in the driver's SQL, on the driver's own connection.

The save's transaction holds SQLite's one write lock, which every other save and the outbox
worker wait for. Through SQLAlchemy it was a session, a pooled connection, BEGIN IMMEDIATE run
from a connection event, three or four statement objects and their results, and the commit:
about half of a POST's service CPU, most of it that machinery rather than the statements
(py-spy, BENCHMARKS.md, branch onb3). Here `Database.write_driver` takes this process's turn
and begins the transaction on the driver's connection, and the same statements run as the
driver's SQL, built once (per set of given fields), with each value bound and each answered
column read by its column type's own SQLAlchemy processor, so everything is stored and read
exactly as through SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Table, inspect
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

from controlcenter.auth.models import User
from controlcenter.onboarding.models import RECORD_COLUMNS, Onboarding
from controlcenter.onboarding.save_values import SaveValues
from controlcenter.outbox.models import OutboxJob

_DIALECT = SQLiteDialect_pysqlite()
_RECORD_TABLE: Table = Onboarding.__table__  # type: ignore[assignment]  # declared as a Table
_JOBS_TABLE: Table = OutboxJob.__table__  # type: ignore[assignment]  # declared as a Table
_USERS_TABLE: Table = User.__table__  # type: ignore[assignment]  # declared as a Table
_quote = _DIALECT.identifier_preparer.quote

_USER = "SELECT brokerage FROM users WHERE id = ?"
_SET_BROKERAGE = "UPDATE users SET brokerage = ?, updated_at = ? WHERE id = ?"


def _bind(table: Table, column: str) -> Callable[[Any], Any]:
    process = table.c[column].type.dialect_impl(_DIALECT).bind_processor(_DIALECT)
    return process if process is not None else _same


def _same(value: Any) -> Any:
    return value


_READS = tuple(
    column.type.dialect_impl(_DIALECT).result_processor(_DIALECT, None) or _same
    for column in RECORD_COLUMNS
)
_RECORD_STAMP = _bind(_RECORD_TABLE, "updated_at")
_USER_STAMP = _bind(_USERS_TABLE, "updated_at")


@lru_cache(maxsize=256)
def _upsert(given: tuple[str, ...]) -> tuple[str, tuple[Callable[[Any], Any], ...]]:
    """The record created, or its `given` fields and `updated_at` updated, answering
    `RECORD_COLUMNS`; the bind processors of the given values."""
    columns = [inspect(Onboarding).columns[name] for name in given]
    names = ["id", "user_id", "created_at", "updated_at", *(column.name for column in columns)]
    changed = "".join(f"{_quote(c.name)} = excluded.{_quote(c.name)}, " for c in columns)
    # Identifiers only come from the models; every value is a parameter.
    sql = (
        f"INSERT INTO onboarding ({', '.join(map(_quote, names))}) "  # noqa: S608
        f"VALUES ({', '.join('?' * len(names))}) "
        f"ON CONFLICT (user_id) DO UPDATE SET {changed}updated_at = excluded.updated_at "
        f"RETURNING {', '.join(_quote(column.name) for column in RECORD_COLUMNS)}"
    )
    return sql, tuple(_bind(_RECORD_TABLE, column.name) for column in columns)


@lru_cache(maxsize=16)
def _insert_jobs(columns: tuple[str, ...]) -> tuple[str, tuple[Callable[[Any], Any], ...]]:
    sql = (
        f"INSERT INTO outbox_jobs ({', '.join(map(_quote, columns))}) "  # noqa: S608
        f"VALUES ({', '.join('?' * len(columns))})"
    )
    return sql, tuple(_bind(_JOBS_TABLE, name) for name in columns)


async def save(driver: Any, save: SaveValues) -> tuple[Any, ...] | None:
    """The save in the transaction `driver` (`Database.write_driver`'s) is in: the record's
    row in `RECORD`'s order, or None when the user is gone (nothing written)."""
    user = await _statement(driver, _USER, (save.user_id,))
    if user is None:
        return None
    if save.brokerage and user[0] != save.brokerage:
        # Only a change is written, so `users.updated_at` moves only then.
        arguments = (save.brokerage, _USER_STAMP(save.now), save.user_id)
        await _statement(driver, _SET_BROKERAGE, arguments)
    sql, binds = _upsert(tuple(save.values))
    stamp = _RECORD_STAMP(save.now)
    given = (bind(value) for bind, value in zip(binds, save.values.values(), strict=True))
    row = await _statement(driver, sql, (save.record_id, save.user_id, stamp, stamp, *given))
    assert row is not None  # an upsert always answers its row
    sql, binds = _insert_jobs(tuple(save.jobs[0]))
    rows = [
        tuple(bind(job[name]) for bind, name in zip(binds, job, strict=True)) for job in save.jobs
    ]
    await (await driver.executemany(sql, rows)).close()
    return tuple(
        read(value) if value is not None else None for read, value in zip(_READS, row, strict=True)
    )


async def _statement(driver: Any, sql: str, parameters: Sequence[Any]) -> Any:
    """Runs `sql`; its first row, or None."""
    cursor = await driver.execute(sql, parameters)
    try:
        return await cursor.fetchone()
    finally:
        await cursor.close()
