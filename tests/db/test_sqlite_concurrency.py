"""SQLite under concurrent writers: WAL, a busy timeout and write transactions that begin
IMMEDIATE mean no writer ever gets "database is locked", within one process (200 asyncio
tasks) or across processes; a process's writers queue behind its one writer in order; a
writer waiting for the lock leaves the event loop running, and reads never wait for a writer;
another process's writer waits for its turn in the kernel, not in SQLite.

These run on their own SQLite file whichever database the rest of the suite uses, since the
behaviour under test is SQLite's.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from controlcenter.db import Database
from controlcenter.db.engine import BUSY_TIMEOUT_S
from controlcenter.db.write_turns import WriteTurns
from tests.db.counter import counted, create_schema, increment, increment_in

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


def _pragmas(session: Session) -> tuple[str, int, int]:
    def pragma(name: str) -> Any:
        return session.execute(text(f"PRAGMA {name}")).scalar_one()

    return pragma("journal_mode"), pragma("busy_timeout"), pragma("foreign_keys")


async def test_wal_busy_timeout_and_foreign_keys_on_every_connection(database: Database) -> None:
    try:
        expected = ("wal", BUSY_TIMEOUT_S * 1000, 1)
        assert await database.run_read(_pragmas) == expected
        assert await database.run_write(_pragmas) == expected
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
        assert await database.run_read(counted) == (TASKS, TASKS)  # no lost update either
    finally:
        await database.dispose()


async def test_a_write_transaction_holds_the_write_lock_from_its_first_read(
    database: Database,
) -> None:
    """`run_write` begins IMMEDIATE: from its first statement, a read, no other connection can
    write, so its later write cannot be refused; `run_read` takes no lock."""
    path = _path(database)

    def read_then_write(session: Session) -> bool:
        session.execute(text("SELECT n FROM counter"))
        refused = _other_writer_refused(path)
        session.execute(text("INSERT INTO writes (who) VALUES ('session')"))
        return refused

    def read(session: Session) -> tuple[int, bool]:
        count = session.execute(text("SELECT count(*) FROM writes")).scalar_one()
        return count, _other_writer_refused(path)

    try:
        assert await database.run_write(read_then_write)
        assert not _other_writer_refused(path)  # committed: the lock is free again
        assert await database.run_read(read) == (1, False)
    finally:
        await database.dispose()


async def test_reads_do_not_wait_for_a_writer(database: Database) -> None:
    """While a write transaction is open, a read answers at once with the last committed
    state (were it to wait for the writer, this would never end: the writer waits for it)."""
    updated, release = threading.Event(), threading.Event()

    def hold(session: Session) -> None:
        session.execute(text("UPDATE counter SET n = 41 WHERE id = 1"))
        updated.set()
        assert release.wait(60)

    try:
        writer = asyncio.create_task(database.run_write(hold))
        assert await asyncio.to_thread(updated.wait, 60)
        assert await database.run_read(counted) == (0, 0)
        release.set()
        await writer
        assert await database.run_read(counted) == (41, 0)
    finally:
        release.set()
        await database.dispose()


async def test_a_process_writers_queue_in_order_behind_a_long_write(database: Database) -> None:
    """A process's writes run one at a time, in the order they were asked for: the ones asked
    for while a write is open wait for it behind the process's one writer, not in SQLite's
    busy handler, and the event loop runs meanwhile."""
    started, release = threading.Event(), threading.Event()

    def long(session: Session) -> None:
        increment_in(session, "first")
        started.set()
        assert release.wait(60)

    def order(session: Session) -> list[str]:
        return list(session.scalars(text("SELECT who FROM writes ORDER BY id")))

    try:
        first = asyncio.create_task(database.run_write(long))
        assert await asyncio.to_thread(started.wait, 60)
        queued = [asyncio.create_task(increment(database, f"then-{i}")) for i in range(5)]
        for _ in range(20):  # the loop serves other tasks meanwhile
            await asyncio.sleep(0.01)
        assert not any(task.done() for task in queued)
        release.set()
        await asyncio.gather(first, *queued)
        assert await database.run_read(order) == ["first", *(f"then-{i}" for i in range(5))]
    finally:
        release.set()
        await database.dispose()


async def test_a_waiting_writer_leaves_the_loop_running_and_gets_in_after_the_commit(
    database: Database,
) -> None:
    """Another connection holds the write lock: the writer waits in SQLite's busy handler, on
    its own thread, while the event loop runs other tasks; once the other commits, the writer
    gets in and neither update is lost."""
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
        assert await database.run_read(counted) == (1001, 1)
    finally:
        other.close()
        await database.dispose()


async def test_a_writer_waits_for_another_process_turn_outside_sqlite(
    database: Database,
) -> None:
    """Another process's writer has its turn (its lock on the turns' file): this process's
    writer waits for it in the kernel, before it begins a transaction, so SQLite's write lock
    stays free meanwhile; it gets in as soon as the turn ends."""
    path = _path(database)
    turn = os.open(WriteTurns(path).path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        await database.run_read(counted)  # connected: the wait below is only for the turn
        fcntl.flock(turn, fcntl.LOCK_EX)  # a descriptor of its own: another writer's turn
        writer = asyncio.create_task(increment(database, "after-the-turn"))
        for _ in range(20):  # the loop serves other tasks meanwhile
            await asyncio.sleep(0.01)
        assert not writer.done()
        assert not _other_writer_refused(path)  # it has not begun: it waits for its turn
        fcntl.flock(turn, fcntl.LOCK_UN)
        await writer
        assert await database.run_read(counted) == (1, 1)
    finally:
        os.close(turn)
        await database.dispose()


async def test_a_process_that_cannot_open_the_turns_file_writes_without_turns(
    tmp_path: Path,
) -> None:
    """The turns are an aid to fairness, SQLite's lock guards the data: when the turns' file
    cannot be opened (here its name leads into a folder that is not there), writes go on."""
    path = tmp_path / "noturns.db"
    WriteTurns(str(path)).path.symlink_to(tmp_path / "missing" / "turns")
    database = Database(f"sqlite+aiosqlite:///{path}")
    try:
        await create_schema(database)
        await increment(database, "without-a-turn")
        await increment(database, "again")
        assert await database.run_read(counted) == (2, 2)
    finally:
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
