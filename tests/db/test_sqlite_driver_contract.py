"""The project's SQLite driver against the SQLAlchemy it was written for (docs/foundation.md).

`db/sqlite_driver.py` stands in for aiosqlite behind SQLAlchemy's aiosqlite adapter, which
reaches into aiosqlite's connection (`_connection`, `_conn`, `_tx`, ...). Those are private, so
the driver is pinned: the SQLAlchemy installed is the one in uv.lock, the one the driver was
checked against (`CHECKED_WITH_SQLALCHEMY`), and everything the adapter of that version reads
from a connection the driver provides. Upgrading SQLAlchemy fails here until the driver is
checked again; `SQLITE_DRIVER=aiosqlite` is the fallback meanwhile.
"""

from __future__ import annotations

import ast
import inspect
import re
import sqlite3
from pathlib import Path

import sqlalchemy
from sqlalchemy import text
from sqlalchemy.dialects.sqlite import aiosqlite as adapter

from controlcenter.config import Config
from controlcenter.db import Database
from controlcenter.db.sqlite_driver import CHECKED_WITH_SQLALCHEMY, InlineConnection

LOCK = Path(__file__).resolve().parents[2] / "uv.lock"


def locked_version(package: str) -> str:
    found = re.search(
        r'\[\[package\]\]\nname = "' + re.escape(package) + r'"\nversion = "([^"]+)"',
        LOCK.read_text(),
    )
    assert found is not None, f"{package} is not in uv.lock"
    return found.group(1)


def adapter_reads() -> set[str]:
    """Every attribute SQLAlchemy's aiosqlite adapter reads from `self._connection`."""
    tree = ast.parse(inspect.getsource(adapter))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "_connection"
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == "self"
    }


def test_the_driver_is_pinned_to_the_locked_sqlalchemy() -> None:
    assert sqlalchemy.__version__ == locked_version("sqlalchemy") == CHECKED_WITH_SQLALCHEMY


def test_the_driver_has_everything_the_adapter_reads() -> None:
    reads = adapter_reads()
    assert {"_conn", "_tx", "isolation_level", "close"} <= reads  # the check reads the source
    connection = InlineConnection(sqlite3.connect(":memory:"))
    missing = sorted(name for name in reads if not hasattr(connection, name))
    assert not missing, f"SQLAlchemy's adapter reads what the driver lacks: {missing}"


def test_the_check_can_fail() -> None:
    class Bare:
        pass

    assert any(not hasattr(Bare(), name) for name in adapter_reads())


async def test_aiosqlite_is_the_selectable_fallback(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fallback.db'}"
    assert Config(database_url=url, sqlite_driver="aiosqlite").sqlite_driver == "aiosqlite"
    database = Database(url, sqlite_driver="aiosqlite")
    try:
        async with database.write() as session:
            await session.execute(text("CREATE TABLE t (x INTEGER)"))
            await session.execute(text("INSERT INTO t VALUES (1)"))
        async with database.write_driver() as driver:  # the chat's event writer's path
            await (await driver.executemany("INSERT INTO t VALUES (?)", [(2,), (3,)])).close()
        async with database.read() as session:
            assert list(await session.scalars(text("SELECT x FROM t ORDER BY x"))) == [1, 2, 3]
        async with database.engine.connect() as connection:
            raw = await connection.get_raw_connection()
            assert not isinstance(raw.driver_connection, InlineConnection)
    finally:
        await database.dispose()
