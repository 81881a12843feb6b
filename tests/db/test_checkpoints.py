"""The service's SQLite commits never checkpoint the write-ahead log; a thread of the process
does (`db/checkpoints.py`): a request's commit no longer copies the log into the database file
and syncs it while the event loop, and every request of the process, waits."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from controlcenter.db import Database
from controlcenter.db.checkpoints import Checkpoints

ROWS = 6_000  # ~6 MB of log: past the 1,000 pages (4 MB) at which a commit would checkpoint
PAGE = 4096


def _database(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "wal.db"
    _database_at(path)
    return path, f"sqlite+aiosqlite:///{path}"


def _database_at(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")


async def _write(database: Database) -> None:
    for start in range(0, ROWS, 100):  # a commit every 100 rows: 60 commits
        async with database.write_driver() as driver:
            rows = [(i, bytes(1000)) for i in range(start, start + 100)]
            await (await driver.executemany("INSERT INTO blobs VALUES (?, ?)", rows)).close()


def _wal(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


async def test_commits_leave_the_log_to_the_thread(tmp_path: Path) -> None:
    path, url = _database(tmp_path)
    database = Database(url, checkpoints_in_thread=True)
    try:
        assert database._checkpoints is not None
        database._checkpoints.stop()  # none meanwhile: only commits could checkpoint
        await _write(database)
        # Everything is still in the log: no commit copied any of it into the database file.
        assert _wal(path).stat().st_size > ROWS * 1000
        assert path.stat().st_size < 10 * PAGE
    finally:
        await database.dispose()


async def test_the_thread_checkpoints_what_the_commits_wrote(tmp_path: Path) -> None:
    path, url = _database(tmp_path)
    database = Database(url, checkpoints_in_thread=True)
    try:
        await _write(database)
        for _ in range(100):  # the thread's interval is 0.5 s
            if path.stat().st_size > ROWS * 1000:
                break
            await asyncio.sleep(0.05)
        assert path.stat().st_size > ROWS * 1000  # copied into the database file
        assert database._checkpoints is not None and database._checkpoints.done > 0
        async with database.read() as session:  # and read back whole
            count = (await session.connection()).exec_driver_sql("SELECT count(*) FROM blobs")
            assert (await count).scalar_one() == ROWS
    finally:
        await database.dispose()


async def test_without_the_thread_commits_checkpoint_as_sqlite_does(tmp_path: Path) -> None:
    """The default for a command's `Database`: SQLite's own checkpoints in its commits."""
    path, url = _database(tmp_path)
    database = Database(url)
    try:
        await _write(database)
        assert path.stat().st_size > 500 * PAGE  # the commit past 1,000 pages copied them
    finally:
        await database.dispose()


def test_an_unreachable_database_is_logged_and_tried_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not created (read-write only), not fatal: the thread keeps trying at each interval."""
    missing = tmp_path / "gone" / "wal.db"
    checkpoints = Checkpoints(str(missing), interval_s=0.02)
    checkpoints.start()
    try:
        time.sleep(0.2)
        assert checkpoints._thread is not None and checkpoints._thread.is_alive()
        assert checkpoints.done == 0 and not missing.parent.exists()
        missing.parent.mkdir()
        _database_at(missing)
        for _ in range(100):
            if checkpoints.done:
                break
            time.sleep(0.02)
        assert checkpoints.done > 0  # the database came back: checkpointed again
    finally:
        checkpoints.stop()
    logged = capsys.readouterr()
    assert (logged.out + logged.err).count("sqlite checkpoint failed") == 1
