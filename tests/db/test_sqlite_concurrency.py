"""SQLite under concurrent writers: WAL, a busy timeout and write transactions that begin
IMMEDIATE mean no writer ever gets "database is locked", within one process (200 asyncio
tasks) or across processes; a writer waiting for the lock leaves the event loop running, and
reads never wait for a writer.

These run on their own SQLite file whichever database the rest of the suite uses, since the
behaviour under test is SQLite's.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import text

from controlcenter.db import Database
from controlcenter.db.engine import BUSY_TIMEOUT_S
from tests.db.counter import create_schema, increment

TASKS = 200
PROCESSES = 2
WRITES_PER_PROCESS = 100


@pytest.fixture
async def database(tmp_path: Path) -> Database:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'concurrency.db'}")
    await create_schema(database)
    return database


def _path(database: Database) -> str:
    return database.url.removeprefix("sqlite+aiosqlite:///")


def _other_writer_refused(path: str) -> bool:
    """Whether another connection, not waiting at all, is refused the write lock now."""
    with closing(sqlite3.connect(path, timeout=0, isolation_level=None)) as other:
        try:
            other.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            assert "locked" in str(exc)
            return True
        other.execute("ROLLBACK")
        return False


async def test_wal_busy_timeout_and_foreign_keys_on_every_connection(database: Database) -> None:
    try:
        async with database.read() as db:
            assert (await db.execute(text("PRAGMA journal_mode"))).scalar_one() == "wal"
            busy_timeout = (await db.execute(text("PRAGMA busy_timeout"))).scalar_one()
            assert busy_timeout == BUSY_TIMEOUT_S * 1000
            assert (await db.execute(text("PRAGMA foreign_keys"))).scalar_one() == 1
    finally:
        await database.dispose()
    # WAL is a property of the file: any other client sees it too.
    with closing(sqlite3.connect(_path(database))) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_200_concurrent_writers_in_one_process(database: Database) -> None:
    try:
        results = await asyncio.gather(
            *(increment(database, f"task-{i}") for i in range(TASKS)), return_exceptions=True
        )
        assert [r for r in results if r is not None] == []
        async with database.read() as db:
            n = (await db.execute(text("SELECT n FROM counter"))).scalar_one()
            count = (await db.execute(text("SELECT count(*) FROM writes"))).scalar_one()
        assert (n, count) == (TASKS, TASKS)  # no lost update either
    finally:
        await database.dispose()


async def test_a_write_transaction_holds_the_write_lock_from_its_first_read(
    database: Database,
) -> None:
    """`write()` begins IMMEDIATE: from its first statement, a read, no other connection can
    write, so its later write cannot be refused; a `read()` takes no lock."""
    path = _path(database)
    try:
        async with database.write() as db:
            await db.execute(text("SELECT n FROM counter"))
            assert _other_writer_refused(path)
            await db.execute(text("INSERT INTO writes (who) VALUES ('session')"))
        assert not _other_writer_refused(path)  # committed: the lock is free again
        async with database.read() as db:
            count = (await db.execute(text("SELECT count(*) FROM writes"))).scalar_one()
            assert not _other_writer_refused(path)
        assert count == 1
    finally:
        await database.dispose()


async def test_reads_do_not_wait_for_a_writer(database: Database) -> None:
    """While a write transaction is open, a read answers at once with the last committed
    state (were it to wait for the writer, this would never end: the writer is this task)."""
    try:
        async with database.write() as writer:
            await writer.execute(text("UPDATE counter SET n = 41 WHERE id = 1"))
            async with database.read() as reader:
                assert (await reader.execute(text("SELECT n FROM counter"))).scalar_one() == 0
        async with database.read() as reader:
            assert (await reader.execute(text("SELECT n FROM counter"))).scalar_one() == 41
    finally:
        await database.dispose()


async def test_a_waiting_writer_leaves_the_loop_running_and_gets_in_after_the_commit(
    database: Database,
) -> None:
    """Another connection holds the write lock: the writer waits in SQLite's busy handler, on
    aiosqlite's thread, while the event loop runs other tasks; once the other commits, the
    writer gets in and neither update is lost."""
    path = _path(database)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("UPDATE counter SET n = n + 1000 WHERE id = 1")
        writer = asyncio.create_task(increment(database, "after-the-lock"))
        for _ in range(20):  # the loop serves other tasks meanwhile
            await asyncio.sleep(0.01)
        assert not writer.done()  # it waits for the lock...
        other.execute("COMMIT")
        await writer  # ...and is let in, without "database is locked"
        async with database.read() as db:
            n = (await db.execute(text("SELECT n FROM counter"))).scalar_one()
        assert n == 1001
    finally:
        other.close()
        await database.dispose()


@pytest.mark.timeout(300)
async def test_writers_in_several_processes_at_once(database: Database, repo_root: Path) -> None:
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.db.writer",
            database.url,
            str(WRITES_PER_PROCESS),
            cwd=repo_root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(PROCESSES)
    ]
    try:
        for process in processes:
            assert process.stdout is not None
            line = await asyncio.wait_for(process.stdout.readline(), timeout=240)
            assert line == b"ready\n", (await process.communicate())[1].decode()
        for process in processes:  # start them all at once, and this process with them
            assert process.stdin is not None
            process.stdin.write(b"go\n")
            await process.stdin.drain()
        here = await asyncio.gather(
            *(increment(database, f"task-{i}") for i in range(TASKS)), return_exceptions=True
        )
        outputs = [await asyncio.wait_for(p.communicate(), timeout=240) for p in processes]
    finally:
        for process in processes:
            if process.returncode is None:
                process.kill()
                await process.wait()
        await database.dispose()
    assert [r for r in here if r is not None] == []
    for process, (stdout, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr.decode()
        assert stdout.endswith(b"done\n")
        assert b"locked" not in stderr
    expected = TASKS + PROCESSES * WRITES_PER_PROCESS
    with closing(sqlite3.connect(_path(database))) as conn:
        assert conn.execute("SELECT n FROM counter").fetchone() == (expected,)
        assert conn.execute("SELECT count(*) FROM writes").fetchone() == (expected,)
        by_process = conn.execute(
            "SELECT count(*) FROM writes WHERE who LIKE 'process-%'"
        ).fetchone()
        assert by_process == (PROCESSES * WRITES_PER_PROCESS,)
